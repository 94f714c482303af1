"""The validator: what the schema says, plus bytes, NFC, safe integers and cross-references."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.tools import Tool
from engram_memory.contract.validate import validate_arguments
from tests.support.payloads import PURPOSE, capture_args, with_change


def code_of(tool: Tool, arguments: object) -> ErrorCode | None:
    try:
        validate_arguments(tool, arguments)
    except ContractError as error:
        return error.code
    return None


def test_valid_capture_passes_unchanged() -> None:
    args = capture_args("A decision worth keeping.")
    assert validate_arguments(Tool.CAPTURE, args) is args


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("extra", 1),
        ("payload/extra", 1),
        ("payload/components/0/extra", 1),
        ("payload/retention", None),
        ("payload/valid_time/t", 5.0),
        ("payload/valid_time/t", 2**53),
        ("payload/valid_time/t", True),
        ("payload/valid_time/t", "1700000000000"),
        ("payload/schema_version", 1),
        ("payload/components/0/kind", "opinion"),
        ("payload/components/0/text", ""),
        ("payload/components/0/text", "x" * 65_537),
        ("payload/components/0/text", "é" * 32_769),
        ("payload/components/0/text", "e\u0301"),
        ("payload/components/0/citation_ids", []),
        ("payload/components/0/citation_ids", ["src", "src"]),
        ("payload/components/0/citation_ids", ["nope"]),
        ("payload/primary_component_id", "nope"),
        ("payload/primary_event/citation_id", "nope"),
        ("payload/citations/0/observed_at", "2026-02-30T00:00:00.000Z"),
        ("payload/citations/0/observed_at", "2026-01-01T00:00:00Z"),
        ("payload/citations/0/source_ref", "x" * 513),
        ("payload/citations/0/source_ref", "é" * 257),
        ("payload/purpose_ref", ""),
        ("payload/reconciliation", {"family_refs": ["b", "a"]}),
        ("payload/reconciliation", {"family_refs": ["a", "a"]}),
        ("payload/retention", {"derivative_rule": "keep"}),
        ("payload/retention", {"expires_at": "2030-01-01T00:00:00.000Z"}),
        ("evidence/citation_ids", ["nope"]),
        ("evidence/attestation", "x" * 4097),
        ("idempotency_key", "short-key-15byt"),
        ("idempotency_key", "k" * 257),
        ("payload/components", ...),
        ("payload/valid_time", {"t": 10, "t_end": 9}),
    ],
)
def test_capture_violations_are_invalid_schema(path: str, value: Any) -> None:
    assert code_of(Tool.CAPTURE, with_change(capture_args("Text."), path, value)) is ErrorCode.INVALID_SCHEMA


def test_duplicate_component_ids_are_invalid_schema() -> None:
    args = capture_args("Text.", context="More.")
    args["payload"]["components"][1]["component_id"] = "main"
    assert code_of(Tool.CAPTURE, args) is ErrorCode.INVALID_SCHEMA


def test_duplicate_citation_ids_are_invalid_schema() -> None:
    args = capture_args("Text.")
    args["payload"]["citations"].append(dict(args["payload"]["citations"][0]))
    assert code_of(Tool.CAPTURE, args) is ErrorCode.INVALID_SCHEMA


def test_primary_event_citation_must_be_cited_by_primary_component() -> None:
    args = capture_args("Text.", context="More.")
    args["payload"]["citations"].append({**args["payload"]["citations"][0], "citation_id": "other"})
    args["payload"]["components"][1]["citation_ids"] = ["other"]
    args["payload"]["primary_event"]["citation_id"] = "other"
    assert code_of(Tool.CAPTURE, args) is ErrorCode.INVALID_SCHEMA


@pytest.mark.parametrize("digest", ["sha256:" + "A" * 64, "sha256:abc", "md5:" + "a" * 32, "a" * 64])
def test_malformed_digest_alone_is_invalid_digest(digest: str) -> None:
    args = with_change(capture_args("Text."), "evidence/evidence_digest", digest)
    assert code_of(Tool.CAPTURE, args) is ErrorCode.INVALID_DIGEST


def test_malformed_digest_with_other_faults_is_invalid_schema() -> None:
    args = with_change(capture_args("Text."), "evidence/evidence_digest", "sha256:x")
    args["extra"] = True
    assert code_of(Tool.CAPTURE, args) is ErrorCode.INVALID_SCHEMA


def test_byte_bounds_count_utf8_bytes_not_code_points() -> None:
    exactly = {"query": "é" * 4096, "purpose_ref": PURPOSE}
    over = {"query": "é" * 4096 + "x", "purpose_ref": PURPOSE}
    assert code_of(Tool.SEARCH, exactly) is None
    assert code_of(Tool.SEARCH, over) is ErrorCode.INVALID_SCHEMA


def test_argument_object_over_one_mebibyte_is_invalid_schema() -> None:
    args = capture_args("x" * 60_000)
    components = args["payload"]["components"]
    for index in range(1, 18):
        components.append({**components[0], "component_id": f"part-{index}"})
    assert code_of(Tool.CAPTURE, args) is ErrorCode.INVALID_SCHEMA


@pytest.mark.parametrize("arguments", [None, [], "text", 3])
def test_non_object_arguments_are_invalid_schema(arguments: object) -> None:
    assert code_of(Tool.SEARCH, arguments) is ErrorCode.INVALID_SCHEMA


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (Tool.SEARCH, {"query": "q", "purpose_ref": PURPOSE, "limit": 0}),
        (Tool.SEARCH, {"query": "q", "purpose_ref": PURPOSE, "limit": 51}),
        (Tool.SEARCH, {"query": "q", "purpose_ref": PURPOSE, "max_packet_bytes": 4095}),
        (Tool.SEARCH, {"query": "q", "purpose_ref": PURPOSE, "capability_policy": {"network": "maybe"}}),
        (Tool.SEARCH, {"query": "q", "purpose_ref": PURPOSE, "page_cursor": ""}),
        (Tool.SEARCH, {"query": "", "purpose_ref": PURPOSE}),
        (Tool.SEARCH, {"query": "q" * 8193, "purpose_ref": PURPOSE}),
        (Tool.GET, {"record_id": "mem_0", "purpose_ref": PURPOSE}),
        (Tool.GET, {"record_id": "MEM_abc", "purpose_ref": PURPOSE}),
        (Tool.FORGET, {"record_id": "mem_abc", "idempotency_key": "k" * 16, "reason_ref": "r", "confirmed": True}),
        (Tool.WITHDRAW, {"candidate_id": "cand_x", "idempotency_key": "k" * 16}),
        (Tool.REQUEST_ADMISSION, {"candidate_id": "", "idempotency_key": "k" * 16}),
    ],
)
def test_tool_argument_violations_are_invalid_schema(tool: Tool, arguments: dict[str, Any]) -> None:
    assert code_of(tool, arguments) is ErrorCode.INVALID_SCHEMA


@settings(max_examples=60)
@given(
    st.text(min_size=1, max_size=20).filter(
        lambda name: (
            name not in {"query", "purpose_ref", "limit", "max_packet_bytes", "capability_policy", "page_cursor"}
        )
    )
)
def test_any_unknown_search_field_is_invalid_schema(name: str) -> None:
    assert code_of(Tool.SEARCH, {"query": "q", "purpose_ref": PURPOSE, name: "x"}) is ErrorCode.INVALID_SCHEMA


@settings(max_examples=60)
@given(st.integers())
def test_valid_time_accepts_exactly_the_safe_integers(value: int) -> None:
    code = code_of(Tool.CAPTURE, with_change(capture_args("Text."), "payload/valid_time/t", value))
    if abs(value) <= 2**53 - 1:
        assert code is None
    else:
        assert code is ErrorCode.INVALID_SCHEMA


@settings(max_examples=60)
@given(st.text(min_size=1, max_size=40))
def test_strings_must_be_nfc_and_free_of_u0000(text: str) -> None:
    import unicodedata

    code = code_of(Tool.SEARCH, {"query": text, "purpose_ref": PURPOSE})
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        assert code is ErrorCode.INVALID_SCHEMA
        return
    assert (code is None) == (unicodedata.is_normalized("NFC", text) and "\x00" not in text)


def _at(args: dict[str, Any], path: str) -> Any:
    value: Any = args
    for part in path.split("/"):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


@pytest.mark.parametrize("path", ["payload/citations/0/content_digest", "evidence/evidence_digest"])
@pytest.mark.parametrize("tail", ["\n", "\r\n", "\n\n", " "])
def test_a_digest_with_anything_after_it_has_the_wrong_shape(path: str, tail: str) -> None:
    # JSON Schema's `$` is the end of the text (ECMA-262); Python's would let a final newline through.
    args = capture_args("A decision worth keeping.")
    assert code_of(Tool.CAPTURE, with_change(args, path, _at(args, path) + tail)) is ErrorCode.INVALID_DIGEST


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        (Tool.GET, {"purpose_ref": PURPOSE}),
        (Tool.FORGET, {"idempotency_key": "k" * 16, "reason_ref": "r"}),
    ],
)
@pytest.mark.parametrize("tail", ["\n", "\r\n", "\n\n"])
def test_a_record_id_with_a_trailing_newline_is_invalid_schema(
    tool: Tool, arguments: dict[str, Any], tail: str
) -> None:
    assert code_of(tool, {**arguments, "record_id": "mem_abc"}) is None
    assert code_of(tool, {**arguments, "record_id": "mem_abc" + tail}) is ErrorCode.INVALID_SCHEMA


def test_an_instant_with_a_trailing_newline_is_invalid_schema() -> None:
    args = capture_args("A decision worth keeping.")
    path = "payload/retention/expires_at"
    retention = {"derivative_rule": "make-ineligible", "expires_at": "2999-01-01T00:00:00.000Z"}
    valid = with_change(args, "payload/retention", retention)
    assert code_of(Tool.CAPTURE, valid) is None
    assert code_of(Tool.CAPTURE, with_change(valid, path, "2999-01-01T00:00:00.000Z\n")) is ErrorCode.INVALID_SCHEMA
