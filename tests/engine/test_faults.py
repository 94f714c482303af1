"""Faults and their codes: a lost commit reply, a locked store, a missing body, a bad or changing policy.

Where a fault can be caused for real it is (a lock held by another connection, a deleted row, a broken
file). The lost commit reply and the policy race cannot be caused on demand; those tests say so.
Every test runs on both stores.
"""

from __future__ import annotations

import pytest

from engram_memory.engine.admission.policy import AdmissionPolicy
from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.faults import NOT_COMMITTED, commit_fault, impatient_store, reads_raise, write_lock_held
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import capture_args, unique_key
from tests.support.raw import raw_store, rows


def test_mutation_outcome_unknown_when_commit_reply_is_lost_simulated(paths: HostPaths) -> None:
    store = commit_fault(paths)
    with steered_engine(paths, clock=ManualClock(), store=store) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        args = capture_args("Idempotency keys make retries safe.")
        store.armed = True
        envelope = agent.call("engram_memory_capture", args)
        assert envelope["error"] == {
            "code": "MUTATION_OUTCOME_UNKNOWN",
            "message": envelope["error"]["message"],
            "retriable": True,
        }
        resolved = agent.value("engram_memory_capture", args)
        assert resolved["status"] == "duplicate_exact"
        with raw_store(paths) as db:
            assert db.count("candidates") == 1


def test_mutation_outcome_unknown_resolves_to_first_execution_when_commit_did_not_happen_simulated(
    paths: HostPaths,
) -> None:
    store = commit_fault(paths, NOT_COMMITTED)
    with steered_engine(paths, clock=ManualClock(), store=store) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        args = capture_args("A retry after an unknown outcome runs exactly once.")
        store.armed = True
        assert agent.error_code("engram_memory_capture", args) == "MUTATION_OUTCOME_UNKNOWN"
        assert agent.value("engram_memory_capture", args)["status"] == "committed_pending"
        assert agent.value("engram_memory_capture", args)["status"] == "duplicate_exact"


def test_store_unavailable_when_another_writer_holds_the_lock(
    paths: HostPaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = impatient_store(paths, monkeypatch)
    with steered_engine(paths, clock=ManualClock(), store=store) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        with write_lock_held(paths):
            envelope = agent.call("engram_memory_capture", capture_args("Locked out."))
        assert envelope["error"]["code"] == "STORE_UNAVAILABLE" and envelope["error"]["retriable"] is True
        assert agent.value("engram_memory_capture", capture_args("Not locked any more."))["cursor"] == 1


def test_blob_missing_when_a_record_body_is_gone(agent: InProcessAgent, paths: HostPaths) -> None:
    record_id = agent.remember("The search index is rebuilt on deploy.")
    with raw_store(paths) as db:
        db.execute("DELETE FROM sealed_bodies WHERE owner_id = ?", (record_id,))
    assert agent.get(record_id)["error"] == {
        "code": "BLOB_MISSING",
        "message": "A stored body is missing; service is stopped.",
        "retriable": False,
    }
    assert (
        agent.call("engram_memory_search", {"query": "search index rebuilt", "purpose_ref": "purpose:tests"})["error"][
            "code"
        ]
        == "BLOB_MISSING"
    )


def test_blob_missing_when_a_body_is_moved_to_another_record(agent: InProcessAgent, paths: HostPaths) -> None:
    first = agent.remember("First body.")
    second = agent.remember("Second body.")
    with raw_store(paths) as db:
        first_body = db.value("SELECT ciphertext FROM sealed_bodies WHERE owner_id = ?", (first,))
        db.execute("UPDATE sealed_bodies SET ciphertext = ? WHERE owner_id = ?", (first_body, second))
    assert agent.get(second)["error"]["code"] == "BLOB_MISSING"


def test_policy_unavailable_when_policy_file_is_broken(agent: InProcessAgent, paths: HostPaths) -> None:
    good = paths.policy.read_text()
    paths.policy.write_text("mode = [unterminated")
    for tool, args in [
        ("engram_memory_capture", capture_args("x")),
        ("engram_memory_search", {"query": "x", "purpose_ref": "purpose:tests"}),
    ]:
        envelope = agent.call(tool, args)
        assert envelope["error"]["code"] == "POLICY_UNAVAILABLE" and envelope["error"]["retriable"] is True
    paths.policy.write_text(good)
    assert agent.capture("Back to normal.")["status"] == "committed_pending"


@pytest.mark.parametrize("line", ["version = 9007199254740993", 'policy_id = "cafe\u0301"'])
def test_policy_unavailable_when_policy_file_holds_what_its_digest_cannot(
    agent: InProcessAgent, paths: HostPaths, line: str
) -> None:
    good = paths.policy.read_text()
    paths.policy.write_text(line + "\n")
    for tool, args in [
        ("engram_memory_capture", capture_args("x")),
        ("engram_memory_search", {"query": "x", "purpose_ref": "purpose:tests"}),
    ]:
        assert agent.call(tool, args)["error"]["code"] == "POLICY_UNAVAILABLE"
    paths.policy.write_text(good)
    assert agent.capture("Back to normal.")["status"] == "committed_pending"


class ChangingPolicy:
    """Simulated race: the host edits the policy between the decision and its commit."""

    def __init__(self) -> None:
        self.reads = 0

    def current(self) -> AdmissionPolicy:
        self.reads += 1
        return AdmissionPolicy(version=self.reads).with_digest()


def test_policy_stale_when_policy_changes_before_commit_simulated(paths: HostPaths) -> None:
    with steered_engine(paths, clock=ManualClock()) as engine:
        candidate = InProcessAgent(engine, bind(paths).binding).capture("Decided under version one.")["candidate_id"]
    with steered_engine(paths, clock=ManualClock(), policies=ChangingPolicy()) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        args = {"candidate_id": candidate, "idempotency_key": unique_key("admit")}
        envelope = agent.call("engram_memory_request_admission", args)
        assert envelope["error"]["code"] == "POLICY_STALE" and envelope["error"]["retriable"] is True
    assert rows(paths, "SELECT state FROM candidates") == [("pending",)]


def test_policy_stale_when_decision_takes_longer_than_300_seconds(paths: HostPaths) -> None:
    clock = ManualClock()
    with steered_engine(paths, clock=clock) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        candidate = agent.capture("A slow decision.")["candidate_id"]
        clock.step_ms = 301_000
        envelope = agent.call(
            "engram_memory_request_admission", {"candidate_id": candidate, "idempotency_key": unique_key("a")}
        )
        assert envelope["error"]["code"] == "POLICY_STALE"


def test_unexpected_fault_becomes_constant_envelope_simulated(
    paths: HostPaths, caplog: pytest.LogCaptureFixture
) -> None:
    with steered_engine(paths, clock=ManualClock(), store=reads_raise(paths)) as engine:
        envelope = engine.handle(
            bind(paths).binding, "engram_memory_search", {"query": "q", "purpose_ref": "purpose:tests"}
        )
    assert envelope["error"]["code"] == "STORE_UNAVAILABLE"
    assert "secret internal detail" not in str(envelope)
    assert envelope["auditId"] in caplog.text


def test_expired_binding_answers_authorization_expired(paths: HostPaths, served: Engine, clock: ManualClock) -> None:
    agent = InProcessAgent(served, bind(paths, lifetime_s=60).binding)
    assert agent.capture("Still valid.")["status"] == "committed_pending"
    clock.advance(61_000)
    envelope = agent.call("engram_memory_search", {"query": "valid", "purpose_ref": "purpose:tests"})
    assert envelope["error"]["code"] == "AUTHORIZATION_EXPIRED" and envelope["error"]["retriable"] is False
