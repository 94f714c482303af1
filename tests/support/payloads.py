"""Capture arguments that satisfy the contract, with knobs for the case under test."""

from __future__ import annotations

import copy
import hashlib
import itertools
from typing import Any

PURPOSE = "purpose:tests"
VALID_FROM_MS = 1_700_000_000_000
_counter = itertools.count(1)


def sha(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def unique_key(prefix: str = "key") -> str:
    """An idempotency key of at least 16 ASCII characters, unique in this test session."""
    return f"{prefix}-{next(_counter):06d}-{hashlib.sha256(prefix.encode()).hexdigest()[:8]}"


def capture_args(
    text: str,
    *,
    purpose: str = PURPOSE,
    key: str | None = None,
    context: str | None = None,
    source_ref: str = "doc:handbook",
    valid_from_ms: int = VALID_FROM_MS,
    retention: dict[str, Any] | None = None,
    reconciliation: dict[str, Any] | None = None,
    attestation: str | None = None,
) -> dict[str, Any]:
    components = [{"component_id": "main", "kind": "decision", "text": text, "citation_ids": ["src"]}]
    if context is not None:
        components.append({"component_id": "ctx", "kind": "context", "text": context, "citation_ids": ["src"]})
    payload: dict[str, Any] = {
        "schema_version": 2,
        "purpose_ref": purpose,
        "valid_time": {"t": valid_from_ms},
        "components": components,
        "primary_component_id": "main",
        "primary_event": {"at": valid_from_ms, "type_ref": "event:decision-made", "citation_id": "src"},
        "citations": [
            {
                "citation_id": "src",
                "source_ref": source_ref,
                "locator": {"scheme": "document", "value": "handbook#section"},
                "content_digest": sha(text),
            }
        ],
    }
    if retention is not None:
        payload["retention"] = retention
    if reconciliation is not None:
        payload["reconciliation"] = reconciliation
    evidence: dict[str, Any] = {
        "evidence_ref": "evidence:review",
        "evidence_digest": sha("e:" + text),
        "citation_ids": ["src"],
    }
    if attestation is not None:
        evidence["attestation"] = attestation
    return {"idempotency_key": key or unique_key("capture"), "payload": payload, "evidence": evidence}


def with_change(args: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `args` with the value at a '/'-separated path replaced (or deleted for ...)."""
    changed = copy.deepcopy(args)
    parts = path.split("/")
    target: Any = changed
    for part in parts[:-1]:
        target = target[int(part)] if isinstance(target, list) else target[part]
    last = parts[-1]
    if value is ...:
        if isinstance(target, list):
            del target[int(last)]
        else:
            del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return changed
