"""One fact, one memory: a candidate whose text is a current record's is that record (`duplicate_exact`).

The payload digest catches only a byte-identical capture; the same note captured again with another key,
valid time or source is the same memory to a person, and forgetting one copy must not leave the other.
Same text means every component, kind for kind, equal as the tombstone guard compares texts (folded
words, spacing, punctuation and invisible characters aside). The records compared are the best lexical
matches of the candidate's primary text whose index fields are the candidate's (cheap, and necessary
for equal text); only those are opened. Near-identical text is the near-duplicate rule's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engram_memory.contract.errors import ContractError
from engram_memory.engine.admission.near_duplicates import PayloadOf, best_lexical_matches
from engram_memory.engine.lifecycle.tombstone_guard import normalised_text
from engram_memory.engine.ports.agent_tx import LexicalIndexTx
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.projection import index_fields

_TEXT_FIELDS = ("primary", "decision", "evidence", "context")


def content_key(payload: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The payload's texts as compared: (role, normalised text) per component, the primary first."""
    primary = payload["primary_component_id"]
    texts = [
        ("primary" if component["component_id"] == primary else component["kind"], normalised_text(component["text"]))
        for component in payload["components"]
    ]
    return tuple(sorted(texts, key=lambda item: (item[0] != "primary", item)))


def same_text_record(
    tx: LexicalIndexTx, scope: Scope, payload: Mapping[str, Any], now_ms: int, payload_of: PayloadOf
) -> str | None:
    """The current record of the scope whose text is the payload's, if any (the best ranked of several)."""
    fields = index_fields(payload)
    tokens = list(dict.fromkeys(fields["primary"].split()))
    if not tokens:
        return None
    docs = best_lexical_matches(tx, scope, tokens, now_ms)
    wanted = content_key(payload)
    same = []
    for doc in docs:
        if any(doc.fields.get(name, "") != fields[name] for name in _TEXT_FIELDS):
            continue
        try:
            if content_key(payload_of(doc.record_id)) == wanted:
                same.append(doc.record_id)
        except ContractError:  # a body that no longer opens is no match
            continue
    return same[0] if same else None
