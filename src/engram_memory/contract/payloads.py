"""The smallest valid capture payload: one component citing one source. Notes imported by the host, the
tool descriptions' worked example and the benchmarks all write this shape; the contract keeps it in one
place so that it changes with the schema."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Citation:
    citation_id: str
    source_ref: str
    scheme: str
    where: str
    content_digest: str


def one_source_payload(
    purpose_ref: str,
    text: str,
    at_ms: int,
    source: Citation,
    *,
    kind: str = "evidence",
    component_id: str = "note",
    event_type: str = "event:noted",
) -> dict[str, Any]:
    """A capture payload (schema_version 2) whose one component, of `kind`, rests on `source`."""
    return {
        "schema_version": 2,
        "purpose_ref": purpose_ref,
        "valid_time": {"t": at_ms},
        "components": [
            {"component_id": component_id, "kind": kind, "text": text, "citation_ids": [source.citation_id]}
        ],
        "primary_component_id": component_id,
        "primary_event": {"at": at_ms, "type_ref": event_type, "citation_id": source.citation_id},
        "citations": [
            {
                "citation_id": source.citation_id,
                "source_ref": source.source_ref,
                "locator": {"scheme": source.scheme, "value": source.where},
                "content_digest": source.content_digest,
            }
        ],
    }


def primary_text(payload: Mapping[str, Any]) -> str:
    """The text of a payload's primary component (what a memory says first)."""
    primary = payload["primary_component_id"]
    return str(next(c["text"] for c in payload["components"] if c["component_id"] == primary))
