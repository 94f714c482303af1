"""The confirmation gate with a clock the test moves: TTLs, single use, the 30 s commit window."""

from __future__ import annotations

import pytest

from engram_memory.engine.engine import ConfirmationError, Engine
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import capture_args, unique_key
from tests.support.raw import raw_store


def _forget_args(record_id: str, key: str | None = None) -> dict[str, str]:
    return {"record_id": record_id, "idempotency_key": key or unique_key("forget"), "reason_ref": "ticket:1"}


def _only_request(engine: Engine) -> str:
    (row, status), *rest = engine.confirmations()
    assert not rest and status == "requested"
    return row.confirmation_id


def test_forget_without_approval_records_one_request(agent: InProcessAgent, steered: Engine) -> None:
    record_id = agent.remember("Backups are restored monthly as a drill.")
    args = _forget_args(record_id)
    assert agent.error_code("engram_memory_forget", args) == "gate_failed"
    assert agent.error_code("engram_memory_forget", args) == "gate_failed"
    rows = steered.confirmations()
    assert len(rows) == 1
    row = rows[0][0]
    assert (row.tool, row.target, row.reason_ref) == ("engram_memory_forget", record_id, "ticket:1")
    assert row.actor.principal == "alice" and row.summary["from_state"] == "accepted_current"


def test_approved_forget_executes_once_and_replays(agent: InProcessAgent, steered: Engine) -> None:
    record_id = agent.remember("Incident reviews are blameless.")
    args = _forget_args(record_id)
    agent.error_code("engram_memory_forget", args)
    steered.approve_confirmation(_only_request(steered), decided_by="host:test", ttl_ms=300_000)
    done = agent.value("engram_memory_forget", args)
    assert done["replayed"] is False and done["receipt"]["to_state"] == "tombstoned"
    replay = agent.value("engram_memory_forget", args)
    assert replay["replayed"] is True and replay["receipt"] == done["receipt"]
    assert steered.confirmations() == []


def test_approval_is_single_use(agent: InProcessAgent, steered: Engine) -> None:
    first = agent.capture("Temporary note one.")
    second_args = {"candidate_id": first["candidate_id"], "idempotency_key": unique_key("w2"), "reason_ref": "r"}
    first_args = {"candidate_id": first["candidate_id"], "idempotency_key": unique_key("w1"), "reason_ref": "r"}
    agent.error_code("engram_memory_withdraw", first_args)
    steered.approve_confirmation(_only_request(steered), decided_by="host:test", ttl_ms=300_000)
    assert agent.value("engram_memory_withdraw", first_args)["key_destruction"] == "complete"
    assert agent.error_code("engram_memory_withdraw", second_args) == "ALREADY_TERMINAL"


def test_approval_lapses_after_its_ttl(agent: InProcessAgent, steered: Engine, clock: ManualClock) -> None:
    record_id = agent.remember("Pager rotation changes on Mondays.")
    args = _forget_args(record_id)
    agent.error_code("engram_memory_forget", args)
    steered.approve_confirmation(_only_request(steered), decided_by="host:test", ttl_ms=300_000)
    clock.advance(300_000)
    assert agent.error_code("engram_memory_forget", args) == "gate_failed"
    assert agent.found_ids("pager rotation") == [record_id]


def test_approval_ttl_is_capped_at_300_seconds(agent: InProcessAgent, steered: Engine) -> None:
    record_id = agent.remember("Staging is rebuilt nightly.")
    agent.error_code("engram_memory_forget", _forget_args(record_id))
    with pytest.raises(ConfirmationError):
        steered.approve_confirmation(_only_request(steered), decided_by="host:test", ttl_ms=300_001)


def test_unanswered_request_expires_and_cannot_be_approved(
    agent: InProcessAgent, steered: Engine, clock: ManualClock
) -> None:
    record_id = agent.remember("Logs are kept for thirty days.")
    agent.error_code("engram_memory_forget", _forget_args(record_id))
    request = _only_request(steered)
    clock.advance(3_600_000)
    with pytest.raises(ConfirmationError, match="expired"):
        steered.approve_confirmation(request, decided_by="host:test", ttl_ms=1000)


def test_commit_past_the_30_second_window_fails_the_gate_and_keeps_the_approval(
    agent: InProcessAgent, steered: Engine, clock: ManualClock, paths: HostPaths
) -> None:
    record_id = agent.remember("Canary deploys hold for ten minutes.")
    args = _forget_args(record_id)
    agent.error_code("engram_memory_forget", args)
    steered.approve_confirmation(_only_request(steered), decided_by="host:test", ttl_ms=300_000)
    clock.step_ms = 31_000  # every read of the clock moves it on: the commit lands 31 s after the check
    assert agent.error_code("engram_memory_forget", args) == "gate_failed"
    clock.step_ms = 0
    with raw_store(paths) as db:
        assert db.rows("SELECT state FROM records WHERE record_id = ?", (record_id,)) == [("accepted_current",)]
        assert db.rows("SELECT status FROM confirmations") == [("approved",)]


def test_denied_operation_is_not_asked_again(agent: InProcessAgent, steered: Engine) -> None:
    record_id = agent.remember("Secrets rotate quarterly.")
    args = _forget_args(record_id)
    agent.error_code("engram_memory_forget", args)
    steered.deny_confirmation(_only_request(steered), decided_by="host:test")
    assert agent.error_code("engram_memory_forget", args) == "gate_failed"
    assert steered.confirmations() == []
    with pytest.raises(ConfirmationError, match="denied"):
        steered.approve_confirmation(
            steered.confirmations(include_decided=True)[0][0].confirmation_id, decided_by="h", ttl_ms=1000
        )


def test_approval_is_bound_to_the_principal(served: Engine, paths: HostPaths, steered: Engine) -> None:
    alice = InProcessAgent(served, bind(paths).binding)
    bob = InProcessAgent(served, bind(paths, principal="bob").binding)
    record_id = alice.remember("Only the owning team may drop tables.")
    args = _forget_args(record_id)
    alice.error_code("engram_memory_forget", args)
    steered.approve_confirmation(_only_request(steered), decided_by="host:test", ttl_ms=300_000)
    assert bob.error_code("engram_memory_forget", args) == "gate_failed"
    assert alice.value("engram_memory_forget", args)["receipt"]["to_state"] == "tombstoned"


def test_approval_is_bound_to_the_operation_digest(agent: InProcessAgent, steered: Engine) -> None:
    record_id = agent.remember("Alerts page the primary on-call first.")
    key = unique_key("forget")
    agent.error_code("engram_memory_forget", _forget_args(record_id, key))
    steered.approve_confirmation(_only_request(steered), decided_by="host:test", ttl_ms=300_000)
    other_reason = {**_forget_args(record_id), "reason_ref": "ticket:other"}
    assert agent.error_code("engram_memory_forget", other_reason) == "gate_failed"


def test_unknown_target_leaves_no_request(agent: InProcessAgent, steered: Engine) -> None:
    assert agent.error_code("engram_memory_forget", _forget_args("mem_aaaaaaaaaaaaaaaa")) == "NOT_FOUND"
    withdraw = {"candidate_id": "cand_nothing", "idempotency_key": unique_key("w"), "reason_ref": "r"}
    assert agent.error_code("engram_memory_withdraw", withdraw) == "NOT_FOUND"
    assert steered.confirmations(include_decided=True) == []


def test_confirm_mutations_binding_gates_capture_and_admission(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    agent = InProcessAgent(served, bind(paths, confirm_mutations=True).binding)
    args = capture_args("Gated capture of a convention.")
    assert agent.error_code("engram_memory_capture", args) == "gate_failed"
    steered.approve_confirmation(_only_request(steered), decided_by="host:test", ttl_ms=300_000)
    candidate = agent.value("engram_memory_capture", args)["candidate_id"]
    admit = {"candidate_id": candidate, "idempotency_key": unique_key("admit")}
    assert agent.error_code("engram_memory_request_admission", admit) == "gate_failed"
    steered.approve_confirmation(_only_request(steered), decided_by="host:test", ttl_ms=300_000)
    assert agent.value("engram_memory_request_admission", admit)["outcome"]["status"] == "accepted"
