"""The six closed input schemas (JSON Schema 2020-12): advertised in `tools/list` and enforced verbatim.

Byte bounds, uniqueness by key and sortedness have no standard keyword, so they travel as
`x-utf8-bytes`, `x-unique-by` and `x-sorted` annotations that `validate.py` enforces; other
validators simply ignore them, and `maxLength` still gives them a loose bound.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from engram_memory.contract.canonical import DIGEST_PATTERN, MAX_SAFE_INTEGER
from engram_memory.contract.ids import RECORD_ID_PATTERN
from engram_memory.contract.instants import INSTANT_PATTERN
from engram_memory.contract.tools import Tool

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
MAX_ARGUMENT_BYTES = 1_048_576
UTF8_BYTES = "x-utf8-bytes"
UNIQUE_BY = "x-unique-by"
SORTED = "x-sorted"


def text(min_bytes: int, max_bytes: int, **extra: Any) -> dict[str, Any]:
    """A string bounded in UTF-8 bytes; code-point bounds are the loosest ones those imply."""
    return {
        "type": "string",
        "minLength": math.ceil(min_bytes / 4),
        "maxLength": max_bytes,
        UTF8_BYTES: {"minimum": min_bytes, "maximum": max_bytes},
        **extra,
    }


def _described(schema: dict[str, Any], description: str | None) -> dict[str, Any]:
    return schema if description is None else {**schema, "description": description}


# Fields that the capture tool's worked example shows (mcp/tools.py) carry no description: every
# description is paid for in tokens on every turn, and the example says more.
def opaque_ref(description: str | None = None) -> dict[str, Any]:
    return _described(text(1, 512), description)


def safe_integer(description: str | None = None, minimum: int = -MAX_SAFE_INTEGER) -> dict[str, Any]:
    return _described({"type": "integer", "minimum": minimum, "maximum": MAX_SAFE_INTEGER}, description)


def digest_field(description: str | None = None) -> dict[str, Any]:
    return _described({"type": "string", "pattern": DIGEST_PATTERN}, description)


def instant(description: str) -> dict[str, Any]:
    return {"type": "string", "format": "date-time", "pattern": INSTANT_PATTERN, "description": description}


def closed(properties: dict[str, Any], required: list[str], description: str | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "required": required,
        "properties": properties,
    }
    if description:
        schema["description"] = description
    return schema


def ref_list(
    item: dict[str, Any], max_items: int, description: str | None = None, min_items: int = 1
) -> dict[str, Any]:
    return _described(
        {"type": "array", "minItems": min_items, "maxItems": max_items, "uniqueItems": True, "items": item},
        description,
    )


IDEMPOTENCY_KEY = text(
    16,
    256,
    description="One key per logical operation, chosen by you, 16-256 UTF-8 bytes (use at least 16 ASCII "
    "characters). Record it before calling; retry with the same key and arguments.",
)
PURPOSE_REF = opaque_ref("The purpose_ref the host bound to this session, exactly as stated in the tool description.")
CANDIDATE_ID = text(1, 512, description="A candidate_id returned by engram_memory_capture, copied verbatim.")
RECORD_ID = {
    "type": "string",
    "minLength": 5,
    "maxLength": 128,
    "pattern": RECORD_ID_PATTERN,
    "description": "A record_id returned by search or admission, copied verbatim.",
}
REASON_REF = opaque_ref("An opaque reference to why (a ticket, a message id); never free text with secrets.")


def _search() -> dict[str, Any]:
    return closed(
        {
            "query": text(1, 8192, description="What to find, in words."),
            "purpose_ref": PURPOSE_REF,
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            "max_packet_bytes": {"type": "integer", "minimum": 4096, "maximum": 1_048_576, "default": 65_536},
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
                "Which ranking channels must answer. 'allow' grants nothing: no channel calls the network.",
            ),
            "page_cursor": text(
                1,
                2048,
                description="next_page_cursor from the previous page of the same query and parameters.",
            ),
        },
        ["query", "purpose_ref"],
    )


def _get() -> dict[str, Any]:
    return closed(
        {
            "record_id": RECORD_ID,
            "purpose_ref": PURPOSE_REF,
            "max_packet_bytes": {"type": "integer", "minimum": 4096, "maximum": 1_048_576, "default": 65_536},
        },
        ["record_id", "purpose_ref"],
    )


def _capture() -> dict[str, Any]:
    citation_ids = ref_list(opaque_ref(), 256)
    component = closed(
        {
            "component_id": opaque_ref(),
            "kind": {"type": "string", "enum": ["context", "decision", "evidence"]},
            "text": text(1, 65_536, description="The knowledge itself. Never secrets, credentials or chat logs."),
            "citation_ids": citation_ids,
        },
        ["component_id", "kind", "text", "citation_ids"],
    )
    citation = closed(
        {
            "citation_id": opaque_ref(),
            "source_ref": opaque_ref("A document, commit, ticket or URL reference."),
            "locator": closed(
                {
                    "scheme": text(1, 512),
                    "value": text(1, 4096),
                },
                ["scheme", "value"],
            ),
            "content_digest": digest_field(),
            "observed_at": instant("When the source was observed (UTC, milliseconds)."),
        },
        ["citation_id", "source_ref", "locator", "content_digest"],
    )
    payload = closed(
        {
            "schema_version": {"type": "integer", "const": 2},
            "purpose_ref": PURPOSE_REF,
            "valid_time": closed(
                {
                    "t": safe_integer(),
                    "t_end": safe_integer("Until (>= t); omit while it stays true."),
                },
                ["t"],
            ),
            "components": {
                "type": "array",
                "minItems": 1,
                "maxItems": 64,
                "items": component,
                UNIQUE_BY: "component_id",
            },
            "primary_component_id": opaque_ref(),
            "primary_event": closed(
                {
                    "at": safe_integer(),
                    "type_ref": opaque_ref(),
                    "citation_id": opaque_ref(),
                },
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
                {
                    "derivative_rule": {"type": "string", "enum": ["retain", "make-ineligible"]},
                    "expires_at": instant("Strictly after capture time and within the host's cap."),
                },
                ["derivative_rule"],
                "Omit unless told otherwise; default derivative_rule is make-ineligible.",
            ),
            "reconciliation": closed(
                {
                    "family_refs": {
                        **ref_list(opaque_ref(), 64, "Sorted, unique.", min_items=0),
                        SORTED: True,
                    }
                },
                ["family_refs"],
            ),
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
            "citation_ids": ref_list(opaque_ref(), 256),
            "attestation": text(1, 4096),
        },
        ["evidence_ref", "evidence_digest", "citation_ids"],
    )
    return closed(
        {"idempotency_key": IDEMPOTENCY_KEY, "payload": payload, "evidence": evidence},
        ["idempotency_key", "payload", "evidence"],
    )


def _request_admission() -> dict[str, Any]:
    return closed(
        {"candidate_id": CANDIDATE_ID, "idempotency_key": IDEMPOTENCY_KEY},
        ["candidate_id", "idempotency_key"],
    )


def _withdraw() -> dict[str, Any]:
    return closed(
        {"candidate_id": CANDIDATE_ID, "idempotency_key": IDEMPOTENCY_KEY, "reason_ref": REASON_REF},
        ["candidate_id", "idempotency_key", "reason_ref"],
    )


def _forget() -> dict[str, Any]:
    return closed(
        {"record_id": RECORD_ID, "idempotency_key": IDEMPOTENCY_KEY, "reason_ref": REASON_REF},
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
