"""SPEC §6: same key and same arguments replay the first result; anything else under that key conflicts."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.mcp.helpers import (
    ADMIT,
    CAPTURE,
    FORGET,
    WITHDRAW,
    Pool,
    assert_failure,
    capture,
    db_count,
    forget_args,
    ok_value,
    remember,
    unique_word,
    withdraw_args,
)
from tests.support.agents import McpAgent
from tests.support.payloads import capture_args, unique_key, with_change


def _state_counts(pool: Pool) -> tuple[int, ...]:
    return tuple(
        db_count(pool.paths, table)
        for table in ("journal", "candidates", "records", "sealed_bodies", "idempotency", "confirmations")
    )


def test_capture_same_key_same_args_duplicate_exact(pool: Pool, alice_era: McpAgent) -> None:
    arguments = capture_args(f"Replay {unique_word()} capture.")
    first = ok_value(alice_era.call(CAPTURE, arguments))
    before = _state_counts(pool)
    again = ok_value(alice_era.call(CAPTURE, arguments))
    assert _state_counts(pool) == before
    assert again["status"] == "duplicate_exact"
    assert {k: v for k, v in again.items() if k != "status"} == {k: v for k, v in first.items() if k != "status"}
    assert again["candidate_id"] == first["candidate_id"]
    assert again["cursor"] == first["cursor"]
    assert again["transaction_receipt_digest"] == first["transaction_receipt_digest"]


def test_capture_replay_after_other_writes_still_duplicate_exact(alice_era: McpAgent) -> None:
    arguments = capture_args(f"Late replay {unique_word()} capture.")
    first = ok_value(alice_era.call(CAPTURE, arguments))
    remember(alice_era, f"Something else {unique_word()} in between.")
    again = ok_value(alice_era.call(CAPTURE, arguments))
    assert (again["status"], again["candidate_id"], again["cursor"]) == (
        "duplicate_exact",
        first["candidate_id"],
        first["cursor"],
    )


def test_capture_replay_after_admission_still_duplicate_exact(alice_era: McpAgent) -> None:
    arguments = capture_args(f"Admitted replay {unique_word()} capture.")
    first = ok_value(alice_era.call(CAPTURE, arguments))
    ok_value(alice_era.call(ADMIT, {"candidate_id": first["candidate_id"], "idempotency_key": unique_key("adm")}))
    again = ok_value(alice_era.call(CAPTURE, arguments))
    assert (again["status"], again["candidate_id"]) == ("duplicate_exact", first["candidate_id"])


def test_admission_same_key_replayed_true(pool: Pool, alice_era: McpAgent) -> None:
    pending = capture(alice_era, f"Replay {unique_word()} admission.")
    arguments = {"candidate_id": pending["candidate_id"], "idempotency_key": unique_key("admit")}
    first = ok_value(alice_era.call(ADMIT, arguments))
    assert first["replayed"] is False
    before = _state_counts(pool)
    again = ok_value(alice_era.call(ADMIT, arguments))
    assert _state_counts(pool) == before
    assert again == {"outcome": first["outcome"], "replayed": True}


def test_admission_replay_of_rejection_replayed_true(alice_era: McpAgent) -> None:
    pending = capture(alice_era, f"Key {'AKIA' + 'IOSFODNN7EXAMPLE'} in {unique_word()}.")
    arguments = {"candidate_id": pending["candidate_id"], "idempotency_key": unique_key("admit")}
    first = ok_value(alice_era.call(ADMIT, arguments))
    assert first["outcome"]["status"] == "rejected"
    assert ok_value(alice_era.call(ADMIT, arguments)) == {"outcome": first["outcome"], "replayed": True}


def test_capture_same_key_other_content_digest_conflict_writes_nothing(pool: Pool, alice_era: McpAgent) -> None:
    key = unique_key("capture")
    ok_value(alice_era.call(CAPTURE, capture_args(f"Original {unique_word()}.", key=key)))
    before = _state_counts(pool)
    assert_failure(alice_era.call(CAPTURE, capture_args(f"Changed {unique_word()}.", key=key)), "DIGEST_CONFLICT")
    assert _state_counts(pool) == before


def test_capture_same_key_other_evidence_digest_conflict(pool: Pool, alice_era: McpAgent) -> None:
    arguments = capture_args(f"Evidence {unique_word()}.")
    ok_value(alice_era.call(CAPTURE, arguments))
    before = _state_counts(pool)
    changed = with_change(arguments, "evidence/evidence_ref", "evidence:other")
    assert_failure(alice_era.call(CAPTURE, changed), "DIGEST_CONFLICT")
    assert _state_counts(pool) == before


def test_admission_same_key_other_candidate_digest_conflict(pool: Pool, alice_era: McpAgent) -> None:
    one = capture(alice_era, f"First {unique_word()} candidate.")
    two = capture(alice_era, f"Second {unique_word()} candidate.")
    key = unique_key("admit")
    ok_value(alice_era.call(ADMIT, {"candidate_id": one["candidate_id"], "idempotency_key": key}))
    before = _state_counts(pool)
    assert_failure(
        alice_era.call(ADMIT, {"candidate_id": two["candidate_id"], "idempotency_key": key}), "DIGEST_CONFLICT"
    )
    assert _state_counts(pool) == before


def test_capture_key_reused_for_admission_digest_conflict(pool: Pool, alice_era: McpAgent) -> None:
    key = unique_key("shared")
    pending = ok_value(alice_era.call(CAPTURE, capture_args(f"Shared key {unique_word()}.", key=key)))
    before = _state_counts(pool)
    envelope = alice_era.call(ADMIT, {"candidate_id": pending["candidate_id"], "idempotency_key": key})
    assert_failure(envelope, "DIGEST_CONFLICT")
    assert _state_counts(pool) == before


def test_admission_key_reused_for_withdraw_digest_conflict(pool: Pool, alice_era: McpAgent) -> None:
    candidate_id, _ = remember(alice_era, f"Withdraw key {unique_word()}.")
    pending = capture(alice_era, f"Other {unique_word()} candidate.")
    key = unique_key("admitkey")
    ok_value(alice_era.call(ADMIT, {"candidate_id": pending["candidate_id"], "idempotency_key": key}))
    before = _state_counts(pool)
    assert_failure(alice_era.call(WITHDRAW, withdraw_args(candidate_id, key=key)), "DIGEST_CONFLICT")
    assert _state_counts(pool) == before


def test_admission_key_reused_for_forget_digest_conflict(pool: Pool, alice_era: McpAgent) -> None:
    pending = capture(alice_era, f"Forget key {unique_word()}.")
    key = unique_key("admitkey")
    record_id = ok_value(alice_era.call(ADMIT, {"candidate_id": pending["candidate_id"], "idempotency_key": key}))[
        "outcome"
    ]["record_id"]
    before = _state_counts(pool)
    assert_failure(alice_era.call(FORGET, forget_args(record_id, key=key)), "DIGEST_CONFLICT")
    assert _state_counts(pool) == before


def test_same_key_other_principal_is_a_new_operation(pool: Pool, era: str) -> None:
    key = unique_key("principal")
    alice = pool.agent("alice", era)
    bob = pool.agent("bob", era)
    first = ok_value(alice.call(CAPTURE, capture_args(f"Alice {unique_word()}.", key=key)))
    other = ok_value(bob.call(CAPTURE, capture_args(f"Bob {unique_word()}.", key=key)))
    assert other["status"] == "committed_pending"
    assert other["candidate_id"] != first["candidate_id"]


def test_same_key_same_args_other_principal_not_a_replay(pool: Pool, era: str) -> None:
    arguments = capture_args(f"Both {unique_word()}.")
    first = ok_value(pool.agent("alice", era).call(CAPTURE, arguments))
    other = ok_value(pool.agent("bob", era).call(CAPTURE, arguments))
    assert other["status"] == "committed_pending"
    assert other["candidate_id"] != first["candidate_id"]


# -- two server processes on one store ---------------------------------------------------------------


def _in_parallel(jobs: list[Callable[[], dict[str, Any]]]) -> list[dict[str, Any]]:
    with ThreadPoolExecutor(max_workers=len(jobs)) as executor:
        return [future.result() for future in [executor.submit(job) for job in jobs]]


def test_concurrent_captures_two_servers_dense_cursors(pool: Pool) -> None:
    agents = [pool.agent("alice", "legacy"), pool.agent("alice", "auto")]
    rounds = 8
    jobs = [
        (
            lambda agent=agent: [
                ok_value(agent.call(CAPTURE, capture_args(f"Parallel {unique_word()}."))) for _ in range(rounds)
            ]
        )
        for agent in agents
    ]
    with ThreadPoolExecutor(max_workers=2) as executor:
        results = [item for future in [executor.submit(job) for job in jobs] for item in future.result()]
    assert all(item["status"] == "committed_pending" for item in results)
    cursors = sorted(item["cursor"] for item in results)
    assert cursors == list(range(cursors[0], cursors[0] + 2 * rounds))
    assert len({item["candidate_id"] for item in results}) == 2 * rounds


def test_concurrent_same_key_two_servers_applied_once(pool: Pool) -> None:
    agents = [pool.agent("alice", "legacy"), pool.agent("alice", "auto")] * 2
    arguments = capture_args(f"Raced {unique_word()} capture.")
    journal = db_count(pool.paths, "journal")
    results = _in_parallel([lambda agent=agent: ok_value(agent.call(CAPTURE, arguments)) for agent in agents])
    assert sorted(item["status"] for item in results) == ["committed_pending"] + ["duplicate_exact"] * 3
    assert len({item["candidate_id"] for item in results}) == 1
    assert len({item["cursor"] for item in results}) == 1
    assert db_count(pool.paths, "journal") == journal + 1
