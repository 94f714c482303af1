"""A model-free check of the tool descriptions: the worked example a description shows is sent exactly as
shown, and it must succeed on the first try (issue 19)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from engram_memory.contract.tools import Tool
from engram_memory.contract.validate import validate_arguments
from tests.mcp.helpers import CAPTURE, admit, ok_value
from tests.support.agents import StdioAgent

pytestmark = pytest.mark.stdio


def _example(agent: StdioAgent, tool: str) -> dict[str, Any]:
    description = next(t.description or "" for t in agent.list_tools() if t.name == tool)
    _head, marker, example = description.partition(" Example: ")
    assert marker, f"{tool} shows no example"
    parsed: dict[str, Any] = json.loads(example)
    return parsed


def test_a_capture_written_only_from_the_description_succeeds_first_try(alice_modern: StdioAgent) -> None:
    arguments = _example(alice_modern, CAPTURE)
    captured = ok_value(alice_modern.call(CAPTURE, arguments))
    assert captured["status"] in {"committed_pending", "duplicate_exact"}  # the example's key may have run before
    outcome = admit(alice_modern, captured["candidate_id"])["outcome"]
    assert outcome["status"] in {"accepted", "duplicate_exact"}


@pytest.mark.parametrize("tool", [Tool.REQUEST_ADMISSION, Tool.WITHDRAW, Tool.FORGET])
def test_the_short_examples_fit_their_schemas_once_the_ids_are_real(alice_modern: StdioAgent, tool: Tool) -> None:
    arguments = _example(alice_modern, tool.value)
    for name, real in (("candidate_id", "cand_" + "a" * 26), ("record_id", "mem_" + "a" * 26)):
        if name in arguments:
            assert arguments[name].endswith("…")  # a placeholder the agent replaces with the id it was given
            arguments[name] = real
    assert validate_arguments(tool, arguments) is arguments
