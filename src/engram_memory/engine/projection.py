"""What an agent sees of a record, and what the lexical index keeps of it.

The view is built from the decrypted body on every read and redacted per host policy; the index
keeps only stemmed tokens per field, and only while the record is accepted_current.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from engram_memory.contract.canonical import REDACTION_DOMAIN, digest
from engram_memory.contract.instants import format_instant
from engram_memory.engine.ports.agent_tx import LexicalIndexTx
from engram_memory.engine.ports.store import RecordRow, Scope
from engram_memory.engine.recall.ranking import FIELDS
from engram_memory.engine.recall.text import tokenize, tokenizer_id


def index_fields(payload: Mapping[str, Any]) -> dict[str, str]:
    """Space-joined tokens per BM25F field: the primary component, then the others by kind."""
    texts: dict[str, list[str]] = {name: [] for name in FIELDS}
    primary_id = payload["primary_component_id"]
    for component in payload["components"]:
        name = "primary" if component["component_id"] == primary_id else component["kind"]
        texts[name].append(component["text"])
    texts["citations"] = [citation["source_ref"] for citation in payload["citations"]]
    return {name: " ".join(tokenize("\n".join(parts))) for name, parts in texts.items()}


def add_index_entry(tx: LexicalIndexTx, scope: Scope, record_id: str, payload: Mapping[str, Any]) -> None:
    """Indexes a record that is becoming accepted_current, naming the tokenizer its entry was built by."""
    tx.index_record(scope, record_id, index_fields(payload), tokenizer=tokenizer_id())


def _copied(value: Any) -> Any:
    """A JSON value's own copy (a payload's dicts and lists; its scalars are immutable): copy.deepcopy's
    memo cost a search a third of a millisecond for ten hits."""
    if type(value) is dict:
        return {key: _copied(item) for key, item in value.items()}
    if type(value) is list:
        return [_copied(item) for item in value]
    return value


def record_view(row: RecordRow, payload: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "record_id": row.record_id,
        "state": row.state,
        "record_digest": row.payload_digest,
        "purpose_ref": payload["purpose_ref"],
        "valid_time": _copied(payload["valid_time"]),
        "components": _copied(payload["components"]),
        "primary_component_id": payload["primary_component_id"],
        "primary_event": _copied(payload["primary_event"]),
        "citations": _copied(payload["citations"]),
        "retention": _copied(payload["retention"]),
        "reconciliation": _copied(payload["reconciliation"]),
        "trust_class": row.trust_class,
        "provenance": {
            "candidate_id": row.candidate_id,
            "principal": row.actor.principal,
            "agent_id": row.actor.agent_id,
            "session": row.actor.session,
            "captured_at": format_instant(row.captured_at_ms),
            "admitted_at": format_instant(row.admitted_at_ms),
        },
    }


# What a search hit carries of its record: what an agent reads, cites and weighs. The record digest, the
# purpose it was captured for, the citations' content digests, the default retention, an empty family
# list and the capture bookkeeping are one engram_memory_get away; ten hits would otherwise pay for them
# ten times (decision 0023).
_SUMMARY_PROVENANCE = ("principal", "captured_at")
_DEFAULT_RETENTION = MappingProxyType({"derivative_rule": "make-ineligible"})


def summary_view(view: Mapping[str, Any]) -> dict[str, Any]:
    """The search projection of an (already redacted) record view: never more than the view holds."""
    summary: dict[str, Any] = {}
    for key, value in view.items():
        if key in ("record_digest", "purpose_ref"):
            continue
        if key == "retention" and value == _DEFAULT_RETENTION:
            continue
        if key == "reconciliation" and not value.get("family_refs"):
            continue
        summary[key] = value
    if "citations" in summary:
        summary["citations"] = [{k: v for k, v in c.items() if k != "content_digest"} for c in summary["citations"]]
    if "provenance" in summary:
        provenance = summary["provenance"]
        summary["provenance"] = {k: provenance[k] for k in _SUMMARY_PROVENANCE if k in provenance}
    return summary


def redact(view: dict[str, Any], fields: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """Removes the host-listed fields; returns the view and the fields actually removed."""
    removed: list[str] = []
    for path in sorted(fields):
        head, _, tail = path.partition(".")
        if not tail:
            if view.pop(head, None) is not None:
                removed.append(path)
            continue
        target = view.get(head)
        items = target if isinstance(target, list) else [target]
        hit = False
        for item in items:
            if isinstance(item, dict) and item.pop(tail, None) is not None:
                hit = True
        if hit:
            removed.append(path)
    return view, removed


def redaction_receipt_digest(
    view_record_id: str, record_digest: str, removed: Sequence[str], policy_digest: str
) -> str:
    return digest(
        REDACTION_DOMAIN,
        {
            "record_id": view_record_id,
            "record_digest": record_digest,
            "redacted_fields": list(removed),
            "policy_digest": policy_digest,
        },
    )
