"""Every error a mutating tool can return, and that each one leaves the store exactly as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.faults import commit_fault
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE, capture_args, unique_key
from tests.support.raw import raw_store

TABLES = ("journal", "candidates", "records", "sealed_bodies", "idempotency", "tombstones", "lexical_index")


def _snapshot(paths: HostPaths) -> dict[str, list[tuple[Any, ...]]]:
    with raw_store(paths) as db:
        return {table: db.rows(f"SELECT * FROM {table} ORDER BY 1") for table in TABLES}


def _cursors(paths: HostPaths) -> list[int]:
    with raw_store(paths) as db:
        return [row[0] for row in db.rows("SELECT cursor FROM journal ORDER BY cursor")]


def _approve_all(engine: Engine) -> None:
    for row, _status in engine.confirmations():
        engine.approve_confirmation(row.confirmation_id, decided_by="host:test", ttl_ms=300_000)


def _gated(agent: InProcessAgent, engine: Engine, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    first = agent.call(tool, args)
    if first["ok"] or first["error"]["code"] != "gate_failed":
        return first
    _approve_all(engine)
    return agent.call(tool, args)


def test_digest_conflict_for_every_mutating_tool_writes_nothing(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    record_id = agent.remember("Conflicts never write.")
    candidate = agent.capture("A pending one.")["candidate_id"]
    key = unique_key("reused")
    agent.value("engram_memory_capture", capture_args("First use of the key.", key=key))
    before = _snapshot(paths)
    attempts = [
        ("engram_memory_capture", capture_args("Other content, same key.", key=key)),
        ("engram_memory_request_admission", {"candidate_id": candidate, "idempotency_key": key}),
        ("engram_memory_withdraw", {"candidate_id": candidate, "idempotency_key": key, "reason_ref": "r"}),
        ("engram_memory_forget", {"record_id": record_id, "idempotency_key": key, "reason_ref": "r"}),
    ]
    for tool, args in attempts:
        assert agent.error_code(tool, args) == "DIGEST_CONFLICT"
    assert _snapshot(paths) == before
    assert steered.confirmations(include_decided=True) == []


def test_same_key_other_target_is_digest_conflict(agent: InProcessAgent, steered: Engine) -> None:
    first = agent.capture("Draft one.")["candidate_id"]
    second = agent.capture("Draft two.")["candidate_id"]
    key = unique_key("admit")
    agent.value("engram_memory_request_admission", {"candidate_id": first, "idempotency_key": key})
    assert agent.error_code("engram_memory_request_admission", {"candidate_id": second, "idempotency_key": key}) == (
        "DIGEST_CONFLICT"
    )


def test_admission_replay_returns_first_outcome(agent: InProcessAgent) -> None:
    candidate = agent.capture("Replayed admission.")["candidate_id"]
    args = {"candidate_id": candidate, "idempotency_key": unique_key("admit")}
    first = agent.value("engram_memory_request_admission", args)
    again = agent.value("engram_memory_request_admission", args)
    assert first["replayed"] is False and again["replayed"] is True
    assert again["outcome"] == first["outcome"]


def test_withdraw_of_an_accepted_candidate_is_illegal_transition(agent: InProcessAgent, steered: Engine) -> None:
    candidate = agent.capture("Accepted, then someone tries to withdraw it.")["candidate_id"]
    agent.admit(candidate)
    args = {"candidate_id": candidate, "idempotency_key": unique_key("w"), "reason_ref": "r"}
    assert agent.error_code("engram_memory_withdraw", args) == "ILLEGAL_TRANSITION"
    assert steered.confirmations(include_decided=True) == []


def test_admission_with_a_missing_candidate_body_is_blob_missing(agent: InProcessAgent, paths: HostPaths) -> None:
    candidate = agent.capture("Its body will vanish.")["candidate_id"]
    with raw_store(paths) as db:
        db.execute("DELETE FROM sealed_bodies WHERE owner_id = ?", (candidate,))
    before = _snapshot(paths)
    args = {"candidate_id": candidate, "idempotency_key": unique_key("admit")}
    assert agent.error_code("engram_memory_request_admission", args) == "BLOB_MISSING"
    assert _snapshot(paths) == before


Setup = Callable[[InProcessAgent], tuple[str, dict[str, Any]]]


def _admission(agent: InProcessAgent) -> tuple[str, dict[str, Any]]:
    candidate = agent.capture("Admission whose reply is lost.")["candidate_id"]
    return "engram_memory_request_admission", {"candidate_id": candidate, "idempotency_key": unique_key("a")}


def _withdraw(agent: InProcessAgent) -> tuple[str, dict[str, Any]]:
    candidate = agent.capture("Withdrawal whose reply is lost.")["candidate_id"]
    return "engram_memory_withdraw", {"candidate_id": candidate, "idempotency_key": unique_key("w"), "reason_ref": "r"}


def _forget(agent: InProcessAgent) -> tuple[str, dict[str, Any]]:
    record_id = agent.remember("Forget whose reply is lost.")
    return "engram_memory_forget", {"record_id": record_id, "idempotency_key": unique_key("f"), "reason_ref": "r"}


@pytest.mark.parametrize("setup", [_admission, _withdraw, _forget], ids=["admission", "withdraw", "forget"])
def test_mutation_outcome_unknown_resolves_by_replay_simulated(paths: HostPaths, setup: Setup) -> None:
    store = commit_fault(paths)
    with steered_engine(paths, clock=ManualClock(), store=store) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        tool, args = setup(agent)
        first = agent.call(tool, args)
        if not first["ok"] and first["error"]["code"] == "gate_failed":
            _approve_all(engine)
        store.armed = True
        lost = agent.call(tool, args)
        assert lost["error"]["code"] == "MUTATION_OUTCOME_UNKNOWN" and lost["error"]["retriable"] is True
        resolved = agent.value(tool, args)
        assert resolved["replayed"] is True
        cursors = _cursors(paths)
        assert cursors == list(range(1, len(cursors) + 1))


def test_gated_replay_needs_no_new_approval(agent: InProcessAgent, steered: Engine) -> None:
    tool, args = _withdraw(agent)
    assert _gated(agent, steered, tool, args)["ok"]
    assert steered.confirmations() == []
    assert agent.value(tool, args)["replayed"] is True


def _with_nul(agent: InProcessAgent) -> list[tuple[str, dict[str, Any]]]:
    record_id = agent.remember("Ids, keys and reasons never carry U+0000.")
    candidate = agent.capture("A pending one.")["candidate_id"]
    key = unique_key("nul")
    return [
        ("engram_memory_get", {"record_id": record_id + "\x00", "purpose_ref": PURPOSE}),
        ("engram_memory_get", {"record_id": record_id, "purpose_ref": PURPOSE + "\x00"}),
        ("engram_memory_search", {"query": "ids\x00keys", "purpose_ref": PURPOSE}),
        ("engram_memory_capture", capture_args("Text with \x00 inside.")),
        ("engram_memory_capture", capture_args("A key with a NUL.", key=key + "\x00")),
        ("engram_memory_request_admission", {"candidate_id": candidate + "\x00", "idempotency_key": key}),
        ("engram_memory_request_admission", {"candidate_id": candidate, "idempotency_key": key + "\x00"}),
        ("engram_memory_withdraw", {"candidate_id": candidate, "idempotency_key": key, "reason_ref": "r\x00"}),
        ("engram_memory_forget", {"record_id": record_id, "idempotency_key": "\x00" + key, "reason_ref": "r"}),
        ("engram_memory_forget", {"record_id": record_id, "idempotency_key": key, "reason_ref": "\x00"}),
    ]


def test_u0000_anywhere_is_invalid_schema_on_every_store(agent: InProcessAgent, paths: HostPaths) -> None:
    # PostgreSQL's text cannot hold U+0000: it must never get as far as the store, on any store.
    attempts = _with_nul(agent)
    before = _snapshot(paths)
    for tool, args in attempts:
        assert agent.error_code(tool, args) == "INVALID_SCHEMA", (tool, args)
    assert _snapshot(paths) == before


@pytest.mark.parametrize("tail", ["\n", "\r\n"])
def test_an_id_with_a_trailing_newline_is_invalid_schema_not_a_lookup(agent: InProcessAgent, tail: str) -> None:
    record_id = agent.remember("A record its id finds, and only its id.")
    assert agent.error_code("engram_memory_get", {"record_id": record_id + tail, "purpose_ref": PURPOSE}) == (
        "INVALID_SCHEMA"
    )
    assert agent.get(record_id)["output"]["value"]["record"]["record_id"] == record_id
