"""Calls that arrive together (the server's group commit): each answered as if alone, sharing one commit.

Every test runs on both stores (PostgreSQL commits each write alone: the answers must be the same).
The lost commit cannot be caused on demand; that test says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from engram_memory.contract.errors import ProtocolFault
from engram_memory.engine.engine import AgentCall, Engine
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.faults import NOT_COMMITTED, commit_fault
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE, capture_args
from tests.support.raw import raw_store

CAPTURE = "engram_memory_capture"
ADMIT = "engram_memory_request_admission"
GET = "engram_memory_get"


def _envelopes(outcomes: list[dict[str, Any] | ProtocolFault]) -> list[dict[str, Any]]:
    assert all(isinstance(outcome, dict) for outcome in outcomes)
    return [outcome for outcome in outcomes if isinstance(outcome, dict)]


@contextmanager
def _counted_batches(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the store batches the engine opens (instrumentation only: every batch still runs)."""
    opened: list[int] = []
    store = engine.deps.store
    original = store.batch

    @contextmanager
    def counted(before_commit: Callable[[], None] | None = None) -> Iterator[None]:
        opened.append(1)
        with original(before_commit):
            yield

    monkeypatch.setattr(store, "batch", counted)
    yield opened


def test_captures_and_admissions_arriving_together_share_one_batch_each(
    paths: HostPaths, steered: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    binding = bind(paths).binding
    texts = [f"Group note {n}: the tram to the depot leaves from platform {n + 2}." for n in range(6)]
    with _counted_batches(steered, monkeypatch) as opened:
        captured = _envelopes(
            steered.handle_group(
                [
                    AgentCall(binding, CAPTURE, capture_args(text, key=f"group-capture-{n:04d}"))
                    for n, text in enumerate(texts)
                ]
            )
        )
        candidates = [envelope["output"]["value"]["candidate_id"] for envelope in captured]
        admitted = _envelopes(
            steered.handle_group(
                [
                    AgentCall(binding, ADMIT, {"candidate_id": candidate, "idempotency_key": f"group-admit-{n:04d}"})
                    for n, candidate in enumerate(candidates)
                ]
            )
        )
    assert opened == [1, 1]
    assert [envelope["output"]["value"]["outcome"]["status"] for envelope in admitted] == ["accepted"] * 6
    assert len({envelope["auditId"] for envelope in captured + admitted}) == 12
    record = admitted[4]["output"]["value"]["outcome"]["record_id"]
    assert record in InProcessAgent(steered, binding).found_ids("tram depot platform 6")
    with raw_store(paths) as db:
        assert db.count("records") == 6
        assert db.count("audit_log", f"tool IN ('{CAPTURE}', '{ADMIT}')") == 12


def test_a_failing_call_rolls_back_alone(paths: HostPaths, steered: Engine) -> None:
    binding = bind(paths).binding
    calls = [
        AgentCall(binding, CAPTURE, capture_args("Before the bad one.", key="alone-capture-0001")),
        AgentCall(binding, CAPTURE, capture_args("", key="alone-capture-0002")),
        AgentCall(binding, ADMIT, {"candidate_id": "cand_" + "a" * 26, "idempotency_key": "alone-admit-0001"}),
        AgentCall(binding, CAPTURE, capture_args("After the bad ones.", key="alone-capture-0003")),
    ]
    envelopes = _envelopes(steered.handle_group(calls))
    assert [envelope["ok"] for envelope in envelopes] == [True, False, False, True]
    assert envelopes[1]["error"]["code"] == "INVALID_SCHEMA"
    with raw_store(paths) as db:
        assert db.count("candidates") == 2


def test_a_call_sees_what_the_calls_before_it_in_the_group_wrote(paths: HostPaths, steered: Engine) -> None:
    binding = bind(paths).binding
    arguments = capture_args("The archive moves to cold storage in March.", key="seen-capture-0001")
    conflicting = capture_args("The archive moves to cold storage in April.", key="seen-capture-0001")
    envelopes = _envelopes(
        steered.handle_group(
            [
                AgentCall(binding, CAPTURE, arguments),
                AgentCall(binding, CAPTURE, arguments),
                AgentCall(binding, CAPTURE, conflicting),
            ]
        )
    )
    first, again, conflict = envelopes
    assert again["output"]["value"]["candidate_id"] == first["output"]["value"]["candidate_id"]
    assert conflict["error"]["code"] == "DIGEST_CONFLICT"


def test_other_tools_split_the_group_and_keep_their_place(paths: HostPaths, steered: Engine) -> None:
    binding = bind(paths).binding
    agent = InProcessAgent(steered, binding)
    candidate = agent.capture("The boiler service is due in October.", key="split-capture-0001")["candidate_id"]
    outcomes = steered.handle_group(
        [
            AgentCall(binding, ADMIT, {"candidate_id": candidate, "idempotency_key": "split-admit-0001"}),
            AgentCall(binding, "engram_memory_search", {"query": "boiler service October", "purpose_ref": PURPOSE}),
            AgentCall(binding, CAPTURE, capture_args("The boiler room key is at reception.", key="split-capture-0002")),
        ]
    )
    admitted, searched, captured = _envelopes(outcomes)
    record = admitted["output"]["value"]["outcome"]["record_id"]
    assert [packet["record"]["record_id"] for packet in searched["output"]["value"]["records"]] == [record]
    assert captured["output"]["value"]["status"] == "committed_pending"


def test_a_protocol_fault_comes_back_in_its_place(paths: HostPaths, steered: Engine) -> None:
    binding = bind(paths).binding
    outcomes = steered.handle_group(
        [
            AgentCall(None, CAPTURE, capture_args("Without a binding.", key="fault-capture-0001")),
            AgentCall(binding, CAPTURE, capture_args("With a binding.", key="fault-capture-0002")),
        ]
    )
    assert isinstance(outcomes[0], ProtocolFault) and outcomes[0].code == -32603
    assert isinstance(outcomes[1], dict) and outcomes[1]["ok"]
    with raw_store(paths) as db:
        assert db.count("candidates") == 1


def test_a_lost_shared_commit_is_an_unknown_outcome_for_every_call_simulated(paths: HostPaths) -> None:
    store = commit_fault(paths, NOT_COMMITTED)
    with steered_engine(paths, clock=ManualClock(), store=store, semantic=False) as engine:
        binding = bind(paths).binding
        calls = [
            AgentCall(
                binding, CAPTURE, capture_args(f"Lost-commit note {n} about the crane.", key=f"lost-capture-{n:04d}")
            )
            for n in range(4)
        ]
        faulty = AgentCall(None, CAPTURE, capture_args("Sent without a binding.", key="lost-capture-9999"))
        store.armed = True
        outcomes = engine.handle_group([*calls, faulty])
        assert isinstance(outcomes[-1], ProtocolFault)  # it wrote nothing: it stays a protocol fault
        envelopes = _envelopes(outcomes[:-1])
        # Both stores commit a group's writes together: the lost commit takes every call with it.
        assert [envelope["error"]["code"] for envelope in envelopes] == ["MUTATION_OUTCOME_UNKNOWN"] * 4
        assert all(envelope["error"]["retriable"] for envelope in envelopes)
        with raw_store(paths) as db:
            assert db.count("candidates") == 0
            assert db.count("audit_log", "outcome = 'MUTATION_OUTCOME_UNKNOWN'") == 4
        again = _envelopes(engine.handle_group(calls))
        assert all(envelope["ok"] for envelope in again)
        with raw_store(paths) as db:
            assert db.count("candidates") == 4
