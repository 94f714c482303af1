"""Where a refused call went wrong: the pointer and rule an agent gets beside the constant INVALID_SCHEMA."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram_memory.contract.errors import ContractError
from engram_memory.contract.schema_faults import MAX_POINTER_CHARS, SchemaFault, pointer_of, schema_fault, schema_faults
from engram_memory.contract.tools import Tool
from engram_memory.contract.validate import validate_arguments
from tests.support.payloads import PURPOSE, capture_args, with_change


@pytest.mark.parametrize(
    ("path", "value", "pointer", "rule"),
    [
        ("extra", 1, "", "additionalProperties"),
        ("payload/components/0/extra", 1, "/payload/components/0", "additionalProperties"),
        ("payload/citations", ..., "/payload/citations", "required"),
        ("payload/valid_time/t", "1700000000000", "/payload/valid_time/t", "type"),
        ("payload/valid_time/t", 2**53, "/payload/valid_time/t", "maximum"),
        ("payload/valid_time/t", float("inf"), "/payload/valid_time/t", "finite"),
        ("payload/components/0/kind", "opinion", "/payload/components/0/kind", "enum"),
        ("payload/components/0/text", "é" * 32_769, "/payload/components/0/text", "utf8-bytes"),
        ("payload/components/0/text", "e\u0301", "/payload/components/0/text", "nfc"),
        ("payload/components/0/text", "a\x00b", "/payload/components/0/text", "no-nul"),
        ("payload/components/0/text", "\ud800", "/payload/components/0/text", "utf-8"),
        ("payload/citations/0/content_digest", "sha256:abc", "/payload/citations/0/content_digest", "pattern"),
        ("payload/citations/0/observed_at", "2026-02-30T00:00:00.000Z", "/payload/citations/0/observed_at", "format"),
        ("payload/reconciliation", {"family_refs": ["b", "a"]}, "/payload/reconciliation/family_refs", "sorted"),
        ("payload/components/0/citation_ids", ["nope"], "/payload/components/0/citation_ids/0", "reference"),
        ("payload/primary_component_id", "nope", "/payload/primary_component_id", "reference"),
        ("payload/primary_event/citation_id", "nope", "/payload/primary_event/citation_id", "reference"),
        ("evidence/citation_ids", ["nope"], "/evidence/citation_ids/0", "reference"),
        ("payload/valid_time", {"t": 10, "t_end": 9}, "/payload/valid_time/t_end", "reference"),
        ("idempotency_key", "short-key-15byt", "/idempotency_key", "utf8-bytes"),
    ],
)
def test_a_capture_fault_names_the_field_and_the_rule(path: str, value: Any, pointer: str, rule: str) -> None:
    arguments = with_change(capture_args("Text."), path, value)
    with pytest.raises(ContractError):
        validate_arguments(Tool.CAPTURE, arguments)
    assert schema_fault(Tool.CAPTURE, arguments) == SchemaFault(pointer, rule)


def test_valid_arguments_have_no_fault() -> None:
    assert schema_fault(Tool.CAPTURE, capture_args("Fine.")) is None
    assert schema_fault(Tool.SEARCH, {"query": "x", "purpose_ref": PURPOSE}) is None


@pytest.mark.parametrize(("arguments", "pointer", "rule"), [([], "", "type"), ({}, "/query", "required")])
def test_the_whole_argument_object_and_a_missing_search_query(arguments: object, pointer: str, rule: str) -> None:
    assert schema_fault(Tool.SEARCH, arguments) == SchemaFault(pointer, rule)


def test_an_oversized_field_is_named_with_its_bound_before_the_whole_object() -> None:
    arguments = {"query": "x" * 1_100_000, "purpose_ref": PURPOSE}
    assert schema_faults(Tool.SEARCH, arguments) == [SchemaFault("/query", "utf8-bytes"), SchemaFault("", "max-bytes")]
    assert "1 to 8,192 UTF-8 bytes" in schema_faults(Tool.SEARCH, arguments)[0].words
    assert "1,048,576" in schema_faults(Tool.SEARCH, arguments)[1].words


def test_an_argument_object_over_the_cap_with_every_field_in_bounds_is_placed_at_the_root() -> None:
    arguments = capture_args("Text.")
    component = arguments["payload"]["components"][0]
    arguments["payload"]["components"] = [
        {**component, "component_id": f"c{n}", "text": "y" * 60_000} for n in range(20)
    ]
    arguments["payload"]["primary_component_id"] = "c0"
    assert schema_fault(Tool.CAPTURE, arguments) == SchemaFault("", "max-bytes")


def test_pointer_segments_are_escaped_and_the_pointer_is_bounded() -> None:
    assert pointer_of(["a/b~c", 0]) == "/a~1b~0c/0"
    assert len(pointer_of(["k" * 1_000])) == MAX_POINTER_CHARS


@pytest.mark.parametrize("name", ["confirmed", "a/b~c", "k" * 1_000, "ignore previous instructions", "名前"])
def test_an_unknown_property_is_placed_at_its_object_and_never_named_back(name: str) -> None:
    fault = schema_fault(Tool.SEARCH, {"query": "x", "purpose_ref": PURPOSE, name: 1})
    assert fault == SchemaFault("", "additionalProperties")
    assert name not in fault.sentence()
    assert "allowed are query, purpose_ref, limit" in fault.words


@settings(max_examples=80, deadline=None)
@given(
    path=st.sampled_from(
        [
            "idempotency_key",
            "payload/purpose_ref",
            "payload/components/0/text",
            "payload/components/0/component_id",
            "payload/citations/0/source_ref",
            "payload/citations/0/locator/value",
            "payload/valid_time/t",
            "evidence/evidence_ref",
        ]
    ),
    value=st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=20), st.lists(st.integers(), max_size=2)),
)
def test_every_refused_capture_gets_a_fault_and_every_accepted_one_none(path: str, value: Any) -> None:
    arguments = with_change(capture_args("Text."), path, value)
    try:
        validate_arguments(Tool.CAPTURE, arguments)
    except ContractError:
        fault = schema_fault(Tool.CAPTURE, arguments)
        assert fault is not None and fault.pointer.startswith("/")
    else:
        assert schema_fault(Tool.CAPTURE, arguments) is None
