"""The advertised schemas: closed at every level, valid 2020-12, and the very objects the validator enforces."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator

from engram_memory.contract.schemas import input_schema, schema_for_validation
from engram_memory.contract.tools import ALL_TOOLS, Tool


def _objects(schema: Any) -> list[dict[str, Any]]:
    found = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found.extend(_objects(value))
    elif isinstance(schema, list):
        for value in schema:
            found.extend(_objects(value))
    return found


@pytest.mark.parametrize("tool", ALL_TOOLS)
def test_schema_is_valid_draft_2020_12(tool: Tool) -> None:
    schema = input_schema(tool)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("tool", ALL_TOOLS)
def test_every_object_in_schema_is_closed(tool: Tool) -> None:
    objects = _objects(input_schema(tool))
    assert objects
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert set(obj["required"]) <= set(obj["properties"])


@pytest.mark.parametrize("tool", ALL_TOOLS)
def test_advertised_schema_equals_enforced_schema(tool: Tool) -> None:
    assert input_schema(tool) == schema_for_validation(tool)


def test_input_schema_hands_out_copies() -> None:
    first = input_schema(Tool.SEARCH)
    first["properties"]["query"]["x-utf8-bytes"][1] = 1
    assert input_schema(Tool.SEARCH)["properties"]["query"]["x-utf8-bytes"] == [1, 8192]


@pytest.mark.parametrize(
    ("tool", "required"),
    [
        (Tool.SEARCH, {"query", "purpose_ref"}),
        (Tool.GET, {"record_id", "purpose_ref"}),
        (Tool.CAPTURE, {"idempotency_key", "payload", "evidence"}),
        (Tool.REQUEST_ADMISSION, {"candidate_id", "idempotency_key"}),
        (Tool.WITHDRAW, {"candidate_id", "idempotency_key", "reason_ref"}),
        (Tool.FORGET, {"record_id", "idempotency_key", "reason_ref"}),
    ],
)
def test_required_arguments_match_spec(tool: Tool, required: set[str]) -> None:
    assert set(input_schema(tool)["required"]) == required


def test_no_schema_accepts_a_host_owned_field() -> None:
    host_owned = {"tenant", "workspace", "scope", "principal", "agent_id", "session", "auditId", "confirmed"}
    for tool in ALL_TOOLS:
        for obj in _objects(input_schema(tool)):
            assert not host_owned & set(obj["properties"])
