"""A store as the first tokenizer (engram-text-1) left it, for the tests of the re-index migration.

That tokenizer split Han and Kana into single characters, kept Hangul words whole (particles glued on)
and did not fold Traditional to Simplified; scopes did not name their tokenizer (the column the store
migration added is NULL). `make_legacy` rewrites a home's index entries exactly so, through the store's
own re-index statement, so postings and statistics stay as consistent as they were.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from engram_memory.contract.states import RecordState
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.ranking import FIELDS
from engram_memory.engine.recall.text import stem
from engram_memory.engine.sealing.bodies import read_payload
from engram_memory.host.settings import HostPaths
from tests.support.raw import raw_store

_CJK = (
    "\u3005\u3007\u3021-\u3029\u3038-\u303b"
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U0001b000-\U0001b16f\U00020000-\U0003ffff"
)
_SEPARATORS = "\u19b0-\u19c0\u19c8\u19c9\u1cf2\u1cf3"
_WORD_RE = re.compile(rf"[^\W_{_CJK}{_SEPARATORS}]+|(?=\w)[{_CJK}]")


def _fold(text: str) -> str:
    if text.isascii():
        return text.lower()
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    text = "".join(ch for ch in text if ord(ch) in (0x3099, 0x309A) or not unicodedata.category(ch).startswith("M"))
    return unicodedata.normalize("NFC", text)


def legacy_tokenize(text: str) -> list[str]:
    return [stem(word) for word in _WORD_RE.findall(_fold(text))]


def legacy_fields(payload: Mapping[str, Any]) -> dict[str, str]:
    texts: dict[str, list[str]] = {name: [] for name in FIELDS}
    primary_id = payload["primary_component_id"]
    for component in payload["components"]:
        name = "primary" if component["component_id"] == primary_id else component["kind"]
        texts[name].append(component["text"])
    texts["citations"] = [citation["source_ref"] for citation in payload["citations"]]
    return {name: " ".join(legacy_tokenize("\n".join(parts))) for name, parts in texts.items()}


def make_legacy(paths: HostPaths, engine: Engine, scope: Scope) -> int:
    """Rewrites the scope's entries with the first tokenizer's tokens; returns how many changed."""
    changed = 0
    with engine.deps.store.write() as tx:
        for record_id, state in tx.record_states(scope).items():
            if state == RecordState.ACCEPTED_CURRENT.value:
                payload = read_payload(engine.deps, tx, scope, record_id, "record")
                changed += tx.reindex_record(scope, record_id, legacy_fields(payload))
    with raw_store(paths) as db:
        db.execute(
            "UPDATE scopes SET tokenizer = NULL WHERE tenant = ? AND workspace = ?", (scope.tenant, scope.workspace)
        )
    return changed
