"""Validated arguments become one typed value at the edge, and a default has one home: the schema."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from engram_memory.contract import arguments as typed
from engram_memory.contract.arguments import (
    AdmissionArguments,
    CaptureArguments,
    ForgetArguments,
    GetArguments,
    SearchArguments,
    WithdrawArguments,
    schema_default,
    typed_arguments,
)
from engram_memory.contract.schemas import schema_for_validation
from engram_memory.contract.tools import Tool

KEY = "k" * 16


def test_a_search_left_to_its_defaults_takes_the_schemas() -> None:
    search = typed_arguments(Tool.SEARCH, {"query": "deploy", "purpose_ref": "p"})
    assert search == SearchArguments("deploy", "p", 10, 65_536, "lexical", "forbid", None)
    assert (search.limit, search.max_packet_bytes) == (
        schema_default(Tool.SEARCH, "limit"),
        schema_default(Tool.SEARCH, "max_packet_bytes"),
    )


def test_what_the_agent_gave_wins_over_a_default() -> None:
    given = {
        "query": "배포 일정",
        "purpose_ref": "p",
        "limit": 3,
        "max_packet_bytes": 4096,
        "capability_policy": {"minimum_channels": "lexical_and_semantic"},
        "page_cursor": "c",
    }
    search = typed_arguments(Tool.SEARCH, given)
    assert search == SearchArguments("배포 일정", "p", 3, 4096, "lexical_and_semantic", "forbid", "c")
    assert typed_arguments(Tool.GET, {"record_id": "r", "purpose_ref": "p"}) == GetArguments("r", "p", 65_536)


def test_a_changed_default_in_the_schema_is_the_one_the_engine_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = copy.deepcopy(dict(schema_for_validation(Tool.SEARCH)))
    changed["properties"]["limit"]["default"] = 7
    changed["properties"]["capability_policy"]["properties"]["network"]["default"] = "allow"

    def schema(tool: Tool) -> Mapping[str, Any]:
        return changed if tool is Tool.SEARCH else schema_for_validation(tool)

    monkeypatch.setattr(typed, "schema_for_validation", schema)
    search = typed_arguments(Tool.SEARCH, {"query": "q", "purpose_ref": "p"})
    assert (search.limit, search.network) == (7, "allow")


def test_a_mutating_tool_keeps_the_arguments_as_given_for_its_idempotency_digest() -> None:
    payload = {"purpose_ref": "p", "schema_version": 2}
    given = {"idempotency_key": KEY, "payload": payload, "evidence": {"evidence_ref": "e"}}
    capture = typed_arguments(Tool.CAPTURE, given)
    assert isinstance(capture, CaptureArguments)
    assert capture.given is given and capture.payload is payload and capture.purpose_ref == "p"
    cases = [
        (Tool.REQUEST_ADMISSION, {"candidate_id": "c", "idempotency_key": KEY}, AdmissionArguments("c", KEY, {})),
        (
            Tool.WITHDRAW,
            {"candidate_id": "c", "idempotency_key": KEY, "reason_ref": "why"},
            WithdrawArguments("c", KEY, "why", {}),
        ),
        (
            Tool.FORGET,
            {"record_id": "r", "idempotency_key": KEY, "reason_ref": "why"},
            ForgetArguments("r", KEY, "why", {}),
        ),
    ]
    for tool, arguments, expected in cases:
        made = typed_arguments(tool, arguments)
        assert made.given is arguments and made.purpose_ref is None
        assert type(made) is type(expected) and made.idempotency_key == KEY
