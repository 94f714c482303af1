"""Errors that teach: a fixer that reads only the text of each refusal repairs nine wrong calls in ten,
and no refusal echoes a value the agent sent. On both stores, through the MCP result the server sends."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from engram_memory.contract.schemas import schema_for_validation
from engram_memory.contract.tools import Tool
from engram_memory.mcp.server import tool_result
from tests.support.fixer import Fixer
from tests.support.inprocess import InProcessAgent
from tests.support.wrong_calls import wrong_calls

TEACHING = frozenset({"INVALID_SCHEMA", "INVALID_DIGEST"})
REPAIRED_AT_LEAST = 0.9


def _answer_text(agent: InProcessAgent, tool: str, arguments: Any) -> str:
    """The text content a client hands the model (never `_meta`, never structured content)."""
    content = tool_result(agent.call(tool, arguments)).content[0]
    text: str = content.text  # type: ignore[union-attr]
    return text


def _strings(value: Any) -> list[str]:
    """The string values in `value` (property names are the schema's, or never named back: see
    tests/contract/test_schema_fault.py)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def test_a_fixer_reading_only_the_text_repairs_nine_in_ten_wrong_calls(agent: InProcessAgent) -> None:
    corpus = list(wrong_calls())
    assert len(corpus) >= 200
    failed: Counter[str] = Counter()
    for call in corpus:
        first = _answer_text(agent, call.tool, call.arguments)
        refused = json.loads(first)
        assert not refused["ok"] and refused["error"]["code"] in TEACHING, (call.kind, refused)
        fixed = Fixer(call.text).repaired(call.arguments, first)
        second = json.loads(_answer_text(agent, call.tool, fixed))
        if not second["ok"] and second["error"]["code"] in TEACHING:
            failed[call.kind.split("/")[0]] += 1
    repaired = 1 - sum(failed.values()) / len(corpus)
    print(f"repaired {repaired:.3f} of {len(corpus)}; not repaired: {dict(failed)}")
    assert repaired >= REPAIRED_AT_LEAST, (repaired, failed)


def _schema_words() -> set[str]:
    """Enum options: the words a message may quote from the schema, whoever else sent them too."""
    found: set[str] = set()
    stack: list[Any] = [schema_for_validation(tool) for tool in Tool]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found.update(option for option in node.get("enum", []) if isinstance(option, str))
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def test_no_refusal_echoes_a_value_the_agent_sent(agent: InProcessAgent) -> None:
    quoted = _schema_words()
    for call in wrong_calls():
        message = json.loads(_answer_text(agent, call.tool, call.arguments))["error"]["message"]
        for sent in _strings(call.arguments):
            if len(sent) >= 8 and not any(sent in word for word in quoted):
                assert sent not in message, (call.kind, sent)
