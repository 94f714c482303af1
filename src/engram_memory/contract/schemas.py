"""The six closed input schemas (JSON Schema 2020-12): advertised in `tools/list` and enforced verbatim.

Byte bounds, uniqueness by key and sortedness have no standard keyword, so they travel as
`x-utf8-bytes: [min, max]`, `x-unique-by` and `x-sorted` annotations that `validate.py` enforces.
Every token of these objects is paid by every agent on every turn (docs/decisions/0023), so they say
each rule once: no code-point bounds beside the byte bounds, and no descriptions (the tool descriptions
and their worked examples say it once).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from engram_memory.contract.canonical import DIGEST_PATTERN, MAX_SAFE_INTEGER
from engram_memory.contract.ids import RECORD_ID_PATTERN
from engram_memory.contract.instants import INSTANT_PATTERN
from engram_memory.contract.tools import Tool

MAX_ARGUMENT_BYTES = 1_048_576
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
UTF8_BYTES = "x-utf8-bytes"
UNIQUE_BY = "x-unique-by"
SORTED = "x-sorted"


def text(min_bytes: int, max_bytes: int) -> dict[str, Any]:
    """A string bounded in UTF-8 bytes (the contract counts bytes, never code points)."""
    return {"type": "string", UTF8_BYTES: [min_bytes, max_bytes]}


def opaque_ref() -> dict[str, Any]:
    return text(1, 512)


def safe_integer() -> dict[str, Any]:
    return {"type": "integer", "minimum": -MAX_SAFE_INTEGER, "maximum": MAX_SAFE_INTEGER}


def digest_field() -> dict[str, Any]:
    return {"type": "string", "pattern": DIGEST_PATTERN}


def instant() -> dict[str, Any]:
    return {"type": "string", "format": "date-time", "pattern": INSTANT_PATTERN}


def closed(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": required, "properties": properties}


def ref_list(max_items: int, min_items: int = 1) -> dict[str, Any]:
    bounds = {"minItems": min_items} if min_items else {}
    return {"type": "array", **bounds, "maxItems": max_items, "uniqueItems": True, "items": opaque_ref()}


def byte_budget() -> dict[str, Any]:
    return {"type": "integer", "minimum": 4096, "maximum": MAX_ARGUMENT_BYTES, "default": 65_536}


def idempotency_key() -> dict[str, Any]:
    return text(16, 256)


def record_id() -> dict[str, Any]:
    return {"type": "string", "maxLength": 128, "pattern": RECORD_ID_PATTERN}


def _search() -> dict[str, Any]:
    return closed(
        {
            "query": text(1, 8192),
            "purpose_ref": opaque_ref(),
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            "max_packet_bytes": byte_budget(),
            "capability_policy": closed(
                {
                    "minimum_channels": {
                        "type": "string",
                        "enum": ["lexical", "lexical_and_semantic"],
                        "default": "lexical",
                    },
                    "network": {"type": "string", "enum": ["forbid", "allow"], "default": "forbid"},
                },
                [],
            ),
            "page_cursor": text(1, 2048),
        },
        ["query", "purpose_ref"],
    )


def _get() -> dict[str, Any]:
    return closed(
        {"record_id": record_id(), "purpose_ref": opaque_ref(), "max_packet_bytes": byte_budget()},
        ["record_id", "purpose_ref"],
    )


def _capture() -> dict[str, Any]:
    component = closed(
        {
            "component_id": opaque_ref(),
            "kind": {"type": "string", "enum": ["context", "decision", "evidence"]},
            "text": text(1, 65_536),
            "citation_ids": ref_list(256),
        },
        ["component_id", "kind", "text", "citation_ids"],
    )
    citation = closed(
        {
            "citation_id": opaque_ref(),
            "source_ref": opaque_ref(),
            "locator": closed({"scheme": text(1, 512), "value": text(1, 4096)}, ["scheme", "value"]),
            "content_digest": digest_field(),
            "observed_at": instant(),
        },
        ["citation_id", "source_ref", "locator", "content_digest"],
    )
    payload = closed(
        {
            "schema_version": {"type": "integer", "const": 2},
            "purpose_ref": opaque_ref(),
            "valid_time": closed({"t": safe_integer(), "t_end": safe_integer()}, ["t"]),
            "components": {
                "type": "array",
                "minItems": 1,
                "maxItems": 64,
                "items": component,
                UNIQUE_BY: "component_id",
            },
            "primary_component_id": opaque_ref(),
            "primary_event": closed(
                {"at": safe_integer(), "type_ref": opaque_ref(), "citation_id": opaque_ref()},
                ["at", "type_ref", "citation_id"],
            ),
            "citations": {
                "type": "array",
                "minItems": 1,
                "maxItems": 256,
                "items": citation,
                UNIQUE_BY: "citation_id",
            },
            "retention": closed(
                {"derivative_rule": {"type": "string", "enum": ["retain", "make-ineligible"]}, "expires_at": instant()},
                ["derivative_rule"],
            ),
            "reconciliation": closed({"family_refs": {**ref_list(64, min_items=0), SORTED: True}}, ["family_refs"]),
        },
        [
            "schema_version",
            "purpose_ref",
            "valid_time",
            "components",
            "primary_component_id",
            "primary_event",
            "citations",
        ],
    )
    evidence = closed(
        {
            "evidence_ref": opaque_ref(),
            "evidence_digest": digest_field(),
            "citation_ids": ref_list(256),
            "attestation": text(1, 4096),
        },
        ["evidence_ref", "evidence_digest", "citation_ids"],
    )
    return closed(
        {"idempotency_key": idempotency_key(), "payload": payload, "evidence": evidence},
        ["idempotency_key", "payload", "evidence"],
    )


def _request_admission() -> dict[str, Any]:
    return closed(
        {"candidate_id": opaque_ref(), "idempotency_key": idempotency_key()},
        ["candidate_id", "idempotency_key"],
    )


def _withdraw() -> dict[str, Any]:
    return closed(
        {"candidate_id": opaque_ref(), "idempotency_key": idempotency_key(), "reason_ref": opaque_ref()},
        ["candidate_id", "idempotency_key", "reason_ref"],
    )


def _forget() -> dict[str, Any]:
    return closed(
        {"record_id": record_id(), "idempotency_key": idempotency_key(), "reason_ref": opaque_ref()},
        ["record_id", "idempotency_key", "reason_ref"],
    )


def _with_dialect(schema: dict[str, Any]) -> dict[str, Any]:
    return {"$schema": JSON_SCHEMA_DIALECT, **schema}


_SCHEMAS: Mapping[Tool, dict[str, Any]] = MappingProxyType(
    {
        Tool.SEARCH: _with_dialect(_search()),
        Tool.GET: _with_dialect(_get()),
        Tool.CAPTURE: _with_dialect(_capture()),
        Tool.REQUEST_ADMISSION: _with_dialect(_request_admission()),
        Tool.WITHDRAW: _with_dialect(_withdraw()),
        Tool.FORGET: _with_dialect(_forget()),
    }
)


def input_schema(tool: Tool) -> dict[str, Any]:
    """A private copy of `tool`'s schema: callers may hand it to an SDK that mutates what it gets."""
    return copy.deepcopy(_SCHEMAS[tool])


def schema_for_validation(tool: Tool) -> Mapping[str, Any]:
    """The shared schema object itself, for the validator (which never mutates it)."""
    return _SCHEMAS[tool]
