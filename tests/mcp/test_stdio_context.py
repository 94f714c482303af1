"""SPEC §2: the host-owned invocation context, as an agent sees it over stdio, in both protocol eras."""

from __future__ import annotations

from typing import Any

import pytest

from engram_memory.contract.schemas import input_schema
from engram_memory.contract.tools import Tool
from tests.mcp.helpers import (
    ALL_TOOL_NAMES,
    CAPTURE,
    ERA_PROTOCOL,
    GET,
    SEARCH,
    Pool,
    assert_failure,
    assert_trusted_context_unavailable,
    assert_unknown_tool,
    db_count,
    ok_value,
    remember,
    sample_args,
    unique_word,
)
from tests.support.agents import ServedAgent, ServedHome
from tests.support.clocks import ManualClock
from tests.support.homes import bind
from tests.support.payloads import PURPOSE, capture_args

OTHER_PURPOSE = "purpose:not-the-bound-one"


def _object_schemas(schema: Any) -> list[dict[str, Any]]:
    """Every sub-schema that describes an object, anywhere in `schema`."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            found.append(schema)
        for value in schema.values():
            found.extend(_object_schemas(value))
    elif isinstance(schema, list):
        for item in schema:
            found.extend(_object_schemas(item))
    return found


def test_protocol_era_negotiated_as_requested(pool: Pool, era: str) -> None:
    assert pool.agent("alice", era).protocol_version == ERA_PROTOCOL[era]


def test_tools_list_full_grant_lists_all_six(pool: Pool, era: str) -> None:
    assert [tool.name for tool in pool.agent("alice", era).list_tools()] == list(ALL_TOOL_NAMES)


# A client that connects (probe or handshake) to a server without a usable binding is refused with the
# reason; one that skips the handshake (a 2026-era client adopting a version it knows) still meets the
# per-call rules: no tools listed, every call -32603, nothing written.
DIRECT = "2026-07-28"
UNAVAILABLE = "Trusted invocation context unavailable: "


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("none", "no binding given (--binding, --binding-file or ENGRAM_BINDING)"),
        ("forged", "the binding token does not verify against this host's key"),
        ("expired", "binding {token_id} expired at "),
    ],
)
@pytest.mark.stdio
def test_connecting_without_a_usable_binding_is_refused_with_the_reason(
    pool: Pool, era: str, name: str, reason: str
) -> None:
    message = pool.refusal(name, era)
    token_id = pool.issued(name).binding.token_id if name != "none" else ""
    assert message.startswith(UNAVAILABLE + reason.format(token_id=token_id))


def test_tools_list_no_binding_is_empty(pool: Pool) -> None:
    assert pool.agent("none", DIRECT).list_tools() == []


@pytest.mark.parametrize("tool", [*ALL_TOOL_NAMES, "engram_memory_delete"])
def test_call_no_binding_trusted_context_unavailable(pool: Pool, tool: str) -> None:
    arguments = sample_args(tool) if tool in ALL_TOOL_NAMES else {}
    assert_trusted_context_unavailable(pool.agent("none", DIRECT), tool, arguments)


def test_capture_no_binding_writes_nothing(pool: Pool) -> None:
    journal = db_count(pool.paths, "journal")
    candidates = db_count(pool.paths, "candidates")
    assert_trusted_context_unavailable(pool.agent("none", DIRECT), CAPTURE, sample_args(CAPTURE))
    assert (db_count(pool.paths, "journal"), db_count(pool.paths, "candidates")) == (journal, candidates)


def test_tools_list_forged_binding_is_empty(pool: Pool) -> None:
    assert pool.agent("forged", DIRECT).list_tools() == []


@pytest.mark.parametrize("tool", ALL_TOOL_NAMES)
def test_call_forged_binding_trusted_context_unavailable(pool: Pool, tool: str) -> None:
    assert_trusted_context_unavailable(pool.agent("forged", DIRECT), tool, sample_args(tool))


def test_tools_list_search_only_grant_lists_only_search(pool: Pool, era: str) -> None:
    assert [tool.name for tool in pool.agent("alice_search_only", era).list_tools()] == [SEARCH]


@pytest.mark.parametrize("tool", [tool for tool in ALL_TOOL_NAMES if tool != SEARCH])
def test_call_ungranted_tool_unknown_tool(pool: Pool, era: str, tool: str) -> None:
    assert_unknown_tool(pool.agent("alice_search_only", era), tool, sample_args(tool))


def test_call_search_only_grant_search_works(pool: Pool, era: str) -> None:
    value = ok_value(pool.agent("alice_search_only", era).call(SEARCH, sample_args(SEARCH)))
    assert value["records"] == []


@pytest.mark.parametrize("name", ["engram_memory_delete", "search", "ENGRAM_MEMORY_SEARCH", "engram_memory_search "])
def test_call_nonexistent_tool_unknown_tool(pool: Pool, era: str, name: str) -> None:
    assert_unknown_tool(pool.agent("alice", era), name, sample_args(SEARCH))


def test_search_purpose_mismatch_trusted_context_unavailable(pool: Pool, era: str) -> None:
    assert_trusted_context_unavailable(pool.agent("alice", era), SEARCH, sample_args(SEARCH, OTHER_PURPOSE))


def test_get_purpose_mismatch_trusted_context_unavailable(pool: Pool, era: str) -> None:
    assert_trusted_context_unavailable(pool.agent("alice", era), GET, sample_args(GET, OTHER_PURPOSE))


def test_capture_purpose_mismatch_trusted_context_unavailable_writes_nothing(pool: Pool, era: str) -> None:
    journal = db_count(pool.paths, "journal")
    arguments = capture_args(f"Decision {unique_word()} under the wrong purpose.", purpose=OTHER_PURPOSE)
    assert_trusted_context_unavailable(pool.agent("alice", era), CAPTURE, arguments)
    assert db_count(pool.paths, "journal") == journal


def test_get_purpose_mismatch_on_known_record_trusted_context_unavailable(pool: Pool, era: str) -> None:
    agent = pool.agent("alice", era)
    word = unique_word()
    _, record_id = remember(agent, f"Purpose check {word} record.")
    assert_trusted_context_unavailable(agent, GET, {"record_id": record_id, "purpose_ref": OTHER_PURPOSE})
    assert_trusted_context_unavailable(agent, SEARCH, {"query": word, "purpose_ref": OTHER_PURPOSE})


def test_tools_list_expired_binding_still_lists_tools(pool: Pool) -> None:
    assert [tool.name for tool in pool.agent("expired", DIRECT).list_tools()] == list(ALL_TOOL_NAMES)


@pytest.mark.parametrize("tool", ALL_TOOL_NAMES)
def test_call_expired_binding_authorization_expired(pool: Pool, tool: str) -> None:
    envelope = pool.agent("expired", DIRECT).call(tool, sample_args(tool))
    assert_failure(envelope, "AUTHORIZATION_EXPIRED")
    assert envelope["error"]["retriable"] is False


def test_capture_expired_binding_writes_nothing(pool: Pool) -> None:
    journal = db_count(pool.paths, "journal")
    assert_failure(pool.agent("expired", DIRECT).call(CAPTURE, sample_args(CAPTURE)), "AUTHORIZATION_EXPIRED")
    assert db_count(pool.paths, "journal") == journal


def test_tool_descriptions_carry_bound_purpose(pool: Pool, era: str) -> None:
    bound = pool.issued("alice_other_purpose").binding.purpose_ref
    tools = pool.agent("alice_other_purpose", era).list_tools()
    assert len(tools) == 6
    for tool in tools:
        assert tool.description is not None
        assert bound in tool.description, tool.name
        assert PURPOSE not in tool.description, tool.name


def test_tool_descriptions_purpose_from_binding_is_usable(pool: Pool, era: str) -> None:
    agent = pool.agent("alice_other_purpose", era)
    bound = pool.issued("alice_other_purpose").binding.purpose_ref
    assert ok_value(agent.call(SEARCH, sample_args(SEARCH, bound)))["records"] == []
    assert_trusted_context_unavailable(agent, SEARCH, sample_args(SEARCH, PURPOSE))


def test_input_schemas_equal_contract_schemas(pool: Pool, era: str) -> None:
    for tool in pool.agent("alice", era).list_tools():
        assert tool.input_schema == input_schema(Tool(tool.name)), tool.name


def test_input_schemas_closed_at_every_level(pool: Pool, era: str) -> None:
    for tool in pool.agent("alice", era).list_tools():
        assert tool.input_schema["additionalProperties"] is False, tool.name
        objects = _object_schemas(tool.input_schema)
        assert objects
        for schema in objects:
            assert schema.get("additionalProperties") is False, (tool.name, schema)


def test_input_schemas_declare_json_schema_2020_12(pool: Pool, era: str) -> None:
    for tool in pool.agent("alice", era).list_tools():
        assert tool.input_schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", tool.name


def test_binding_expiring_mid_session_authorization_expired(pool: Pool) -> None:
    """The server's clock passes the binding's expiry between two calls of one session."""
    clock = ManualClock()
    issued = bind(pool.paths, now_s=clock.now // 1000, lifetime_s=60, session="session-short")
    served = ServedHome(pool.paths, clock=clock)
    try:
        with ServedAgent(served, issued.token) as agent:
            assert ok_value(agent.call(SEARCH, sample_args(SEARCH)))["records"] == []
            clock.advance(issued.binding.expires_at_ms - clock.now)
            assert_failure(agent.call(SEARCH, sample_args(SEARCH)), "AUTHORIZATION_EXPIRED")
            assert_failure(agent.call(CAPTURE, sample_args(CAPTURE)), "AUTHORIZATION_EXPIRED")
    finally:
        served.close()
