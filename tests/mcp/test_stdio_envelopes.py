"""SPEC §3 and §13: the two envelope shapes, constant messages, retriable flags, auditIds and the audit log."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from engram_memory.contract.errors import MESSAGES, ErrorCode
from tests.mcp.helpers import (
    ADMIT,
    CAPTURE,
    FAILURE_KEYS,
    FORGET,
    GET,
    SEARCH,
    SPEC_RETRIABLE,
    SUCCESS_KEYS,
    WITHDRAW,
    Pool,
    assert_failure,
    assert_trusted_context_unavailable,
    capture,
    db_count,
    db_query,
    ok_value,
    remember,
    sample_args,
    search,
    unique_word,
    withdraw_args,
)
from tests.support.agents import McpAgent
from tests.support.payloads import PURPOSE, capture_args, unique_key, with_change


def test_success_envelope_exact_shape(alice_era: McpAgent) -> None:
    envelope = search(alice_era, unique_word("nothing"))
    assert set(envelope) == SUCCESS_KEYS
    assert envelope["ok"] is True
    assert envelope["redactionClass"] == "high"
    assert set(envelope["output"]) == {"schema_version", "value"}
    assert envelope["output"]["schema_version"] == 1
    assert envelope["output"]["value"]["records"] == []


def test_success_envelope_exact_shape_for_capture(alice_era: McpAgent) -> None:
    envelope = alice_era.call(CAPTURE, capture_args(f"Envelope shape {unique_word()} decision."))
    assert set(envelope) == SUCCESS_KEYS
    assert envelope["ok"] is True and envelope["redactionClass"] == "high"
    assert envelope["output"]["schema_version"] == 1
    assert envelope["output"]["value"]["status"] == "committed_pending"


def test_failure_envelope_exact_shape(alice_era: McpAgent) -> None:
    envelope = alice_era.call(SEARCH, {"query": "x", "purpose_ref": PURPOSE, "limit": 0})
    assert set(envelope) == FAILURE_KEYS
    assert envelope["ok"] is False
    assert envelope["redactionClass"] == "high"
    assert envelope["error"] == {
        "code": "INVALID_SCHEMA",
        "message": MESSAGES[ErrorCode.INVALID_SCHEMA] + " At /limit: an integer from 1 to 50.",
        "retriable": False,
    }


def test_tool_result_carries_envelope_as_structured_and_text(alice_era: McpAgent) -> None:
    for arguments, is_error in (
        ({"query": unique_word(), "purpose_ref": PURPOSE}, False),
        ({"query": "x", "purpose_ref": PURPOSE, "limit": 51}, True),
    ):
        result = alice_era.raw_call(SEARCH, arguments)
        assert result.is_error is is_error
        assert len(result.content) == 1
        block = result.content[0]
        assert isinstance(block, types.TextContent)
        assert json.loads(block.text) == result.structured_content
        assert result.structured_content is not None
        assert result.structured_content["ok"] is (not is_error)


def test_audit_id_fresh_per_call(alice_era: McpAgent) -> None:
    arguments = {"query": unique_word(), "purpose_ref": PURPOSE}
    ids = [alice_era.call(SEARCH, arguments)["auditId"] for _ in range(3)]
    ids += [alice_era.call(SEARCH, {**arguments, "limit": 0})["auditId"] for _ in range(2)]
    replay = capture_args(f"Replayed {unique_word()} capture.")
    ids += [alice_era.call(CAPTURE, replay)["auditId"] for _ in range(2)]
    assert len(set(ids)) == len(ids) == 7
    assert all(isinstance(audit_id, str) and audit_id for audit_id in ids)


def _failing_calls(agent: McpAgent) -> list[tuple[str, dict[str, Any], list[str]]]:
    """(expected code, envelope, strings that must not leak into the message) for many codes."""
    secret_word = unique_word("leak")
    calls: list[tuple[str, dict[str, Any], list[str]]] = []
    calls.append(
        (
            "INVALID_SCHEMA",
            agent.call(SEARCH, {"query": secret_word, "purpose_ref": PURPOSE, secret_word: 1}),
            [secret_word],
        )
    )
    bad_digest = capture_args(f"Digest {secret_word}.")
    bad_digest = with_change(bad_digest, "evidence/evidence_digest", "sha256:" + "AB" * 32)
    calls.append(("INVALID_DIGEST", agent.call(CAPTURE, bad_digest), [secret_word, "AB" * 32]))
    missing_record = sample_args(GET)
    calls.append(("NOT_FOUND", agent.call(GET, missing_record), [missing_record["record_id"]]))
    missing_candidate = {"candidate_id": "cand_" + secret_word, "idempotency_key": unique_key("admit")}
    calls.append(("NOT_FOUND", agent.call(ADMIT, missing_candidate), [secret_word, "cand_"]))
    key = unique_key("conflict")
    ok_value(agent.call(CAPTURE, capture_args(f"First {unique_word()}.", key=key)))
    calls.append(
        (
            "DIGEST_CONFLICT",
            agent.call(CAPTURE, capture_args(f"Second {secret_word}.", key=key)),
            [key, secret_word],
        )
    )
    cursor = "pc1." + secret_word + ".AAAA"
    calls.append(
        (
            "STALE_PAGE",
            agent.call(SEARCH, {"query": secret_word, "purpose_ref": PURPOSE, "page_cursor": cursor}),
            [secret_word, cursor],
        )
    )
    calls.append(
        (
            "RANKING_UNAVAILABLE",
            agent.call(
                SEARCH,
                {
                    "query": secret_word,
                    "purpose_ref": PURPOSE,
                    "capability_policy": {"minimum_channels": "lexical_and_semantic"},
                },
            ),
            [secret_word],
        )
    )
    retain = capture_args(f"Retain {secret_word}.", retention={"derivative_rule": "retain"})
    calls.append(("UNAUTHORIZED", agent.call(CAPTURE, retain), [secret_word, "alice", "tenant-a"]))
    pending = capture(agent, f"Gate {secret_word} candidate.")
    calls.append(
        (
            "gate_failed",
            agent.call(WITHDRAW, withdraw_args(pending["candidate_id"], reason="reason:" + secret_word)),
            [pending["candidate_id"], secret_word],
        )
    )
    return calls


def test_error_messages_constant_and_free_of_details(alice_era: McpAgent, pool: Pool) -> None:
    calls = _failing_calls(alice_era)
    assert [code for code, _, _ in calls] == [
        "INVALID_SCHEMA",
        "INVALID_DIGEST",
        "NOT_FOUND",
        "NOT_FOUND",
        "DIGEST_CONFLICT",
        "STALE_PAGE",
        "RANKING_UNAVAILABLE",
        "UNAUTHORIZED",
        "gate_failed",
    ]
    for code, envelope, leaks in calls:
        assert_failure(envelope, code)
        message = envelope["error"]["message"]
        for leak in [*leaks, str(pool.paths.home), "engram.db", "SELECT", "Traceback", "sqlite"]:
            assert leak not in message, (code, leak)


def test_error_retriable_flags_follow_spec_table(alice_era: McpAgent) -> None:
    seen = {}
    for code, envelope, _ in _failing_calls(alice_era):
        seen[code] = envelope["error"]["retriable"]
    assert seen == {
        "INVALID_SCHEMA": False,
        "INVALID_DIGEST": False,
        "NOT_FOUND": False,
        "DIGEST_CONFLICT": False,
        "STALE_PAGE": False,
        "RANKING_UNAVAILABLE": True,
        "UNAUTHORIZED": False,
        "gate_failed": False,
    }
    assert {code for code, retriable in seen.items() if retriable} <= SPEC_RETRIABLE


def _audit_count(pool: Pool) -> int:
    return db_count(pool.paths, "audit_log")


@pytest.mark.parametrize("tool", [SEARCH, GET, CAPTURE, ADMIT, WITHDRAW, FORGET])
def test_audit_row_per_call(pool: Pool, era: str, tool: str) -> None:
    agent = pool.agent("alice", era)
    before = _audit_count(pool)
    envelope = agent.call(tool, sample_args(tool))
    assert _audit_count(pool) == before + 1
    rows = db_query(
        pool.paths,
        "SELECT tool, outcome, tenant, workspace, principal, agent_id, session, token_id FROM audit_log"
        " WHERE audit_id = ?",
        (envelope["auditId"],),
    )
    outcome = "ok" if envelope["ok"] else envelope["error"]["code"]
    binding = pool.issued("alice").binding
    ids = (binding.tenant, binding.workspace, binding.principal, binding.agent_id, binding.session, binding.token_id)
    assert rows == [(tool, outcome, *ids)]


def test_audit_row_per_failed_call(pool: Pool, era: str) -> None:
    agent = pool.agent("alice", era)
    before = _audit_count(pool)
    envelope = agent.call(SEARCH, {"query": "x", "purpose_ref": PURPOSE, "limit": 0})
    assert _audit_count(pool) == before + 1
    rows = db_query(pool.paths, "SELECT outcome FROM audit_log WHERE audit_id = ?", (envelope["auditId"],))
    assert rows == [("INVALID_SCHEMA",)]


def test_audit_row_per_protocol_error_call(pool: Pool) -> None:
    before = _audit_count(pool)
    # a 2026-era client that adopts its version skips the handshake an unbound server refuses
    assert_trusted_context_unavailable(pool.agent("none", "2026-07-28"), SEARCH, sample_args(SEARCH))
    assert _audit_count(pool) == before + 1


def test_audit_rows_per_call_sequence(pool: Pool, era: str) -> None:
    agent = pool.agent("alice", era)
    before = _audit_count(pool)
    _, record_id = remember(agent, f"Audit sequence {unique_word()} record.")
    search(agent, "audit sequence")
    agent.call(GET, {"record_id": record_id, "purpose_ref": PURPOSE})
    assert _audit_count(pool) == before + 4


def test_audit_rows_hold_no_memory_text(pool: Pool, era: str) -> None:
    agent = pool.agent("alice", era)
    marker = unique_word("auditmarker")
    query_marker = unique_word("auditquery")
    before = db_query(pool.paths, "SELECT MAX(seq) FROM audit_log")[0][0] or 0
    _, record_id = remember(agent, f"The {marker} decision keeps audit rows free of text.", context=f"ctx {marker}")
    search(agent, f"{marker} {query_marker}")
    agent.call(GET, {"record_id": record_id, "purpose_ref": PURPOSE})
    agent.call(SEARCH, {"query": query_marker, "purpose_ref": PURPOSE, "limit": 0})
    rows = db_query(pool.paths, "SELECT * FROM audit_log WHERE seq > ?", (before,))
    assert len(rows) == 5
    flat = json.dumps(rows)
    assert marker not in flat
    assert query_marker not in flat
    assert "audit rows free" not in flat


def test_audit_row_per_unknown_tool_call(pool: Pool, era: str) -> None:
    before = _audit_count(pool)
    with pytest.raises(MCPError):
        pool.agent("alice", era).raw_call("engram_memory_delete", {})
    assert _audit_count(pool) == before + 1
