"""SPEC §7: the human gate for withdraw and forget (and for capture/admission when the binding asks for it).

The agent side is the real server over stdio; the human side is the real host CLI in a subprocess. The gate
is the same whatever protocol era the client speaks: the first call of each tool and the approved retry run
in both eras, the rest in the modern one (tests/mcp/test_stdio_envelopes.py covers the eras themselves).
"""

from __future__ import annotations

import time

from tests.mcp.helpers import (
    ADMIT,
    CAPTURE,
    DIGEST_RE,
    FORGET,
    WITHDRAW,
    HostCli,
    Pool,
    admit,
    assert_failure,
    capture,
    db_count,
    forget_args,
    found_ids,
    get,
    ok_value,
    remember,
    unique_word,
    withdraw_args,
)
from tests.support.agents import McpAgent
from tests.support.payloads import capture_args, unique_key

RECEIPT_KEYS = {
    "event_id",
    "operation",
    "from_state",
    "to_state",
    "cursor",
    "event_digest",
    "authorization_receipt_digest",
    "transaction_receipt_digest",
}


def _check_receipt(receipt: dict[str, object], operation: str, from_state: str, to_state: str) -> None:
    assert set(receipt) == RECEIPT_KEYS
    assert (receipt["operation"], receipt["from_state"], receipt["to_state"]) == (operation, from_state, to_state)
    assert isinstance(receipt["cursor"], int) and receipt["cursor"] >= 1
    for name in ("event_digest", "authorization_receipt_digest", "transaction_receipt_digest"):
        assert DIGEST_RE.fullmatch(str(receipt[name])), name
    assert isinstance(receipt["event_id"], str) and receipt["event_id"]


# -- the first call -------------------------------------------------------------------------------


def test_withdraw_first_call_gate_failed_one_request(alice_era: McpAgent, host: HostCli) -> None:
    pending = capture(alice_era, f"Withdraw me {unique_word()}.")
    envelope = alice_era.call(WITHDRAW, withdraw_args(pending["candidate_id"], reason="reason:ticket-77"))
    assert_failure(envelope, "gate_failed")
    assert envelope["error"]["retriable"] is False
    request = host.only_request(pending["candidate_id"])
    assert request["tool"] == WITHDRAW
    assert request["target"] == pending["candidate_id"]
    assert request["reason_ref"] == "reason:ticket-77"
    assert request["status"] == "requested"
    assert request["principal"] == "alice"
    assert envelope["error"]["confirmation_request_id"] == request["id"]
    assert f"approve {request['id']}" in envelope["error"]["for_the_person"]


def test_forget_first_call_gate_failed_one_request(alice_era: McpAgent, host: HostCli) -> None:
    _, record_id = remember(alice_era, f"Forget me {unique_word()}.")
    envelope = alice_era.call(FORGET, forget_args(record_id, reason="reason:ticket-78"))
    assert_failure(envelope, "gate_failed")
    assert envelope["error"]["retriable"] is False
    request = host.only_request(record_id)
    assert (request["tool"], request["target"], request["reason_ref"]) == (FORGET, record_id, "reason:ticket-78")
    # Nothing happened yet: the record is still current.
    assert ok_value(get(alice_era, record_id))["record"]["state"] == "accepted_current"


def test_gate_repeat_before_approval_no_second_request(alice_era: McpAgent, host: HostCli) -> None:
    _, record_id = remember(alice_era, f"Repeat {unique_word()}.")
    arguments = forget_args(record_id)
    answers = [alice_era.call(FORGET, arguments) for _ in range(3)]
    for envelope in answers:
        assert_failure(envelope, "gate_failed")
    (request,) = host.confirmations(include_all=True, target=record_id)
    assert {envelope["error"]["confirmation_request_id"] for envelope in answers} == {request["id"]}


# -- after approval -------------------------------------------------------------------------------


def test_withdraw_after_approval_executes(pool: Pool, alice_era: McpAgent, host: HostCli) -> None:
    pending = capture(alice_era, f"Approved withdraw {unique_word()}.")
    arguments = withdraw_args(pending["candidate_id"])
    assert_failure(alice_era.call(WITHDRAW, arguments), "gate_failed")
    approved = host.approve(host.only_request(pending["candidate_id"])["id"])
    assert approved["status"] == "approved"
    assert db_count(pool.paths, "sealed_bodies", "owner_id = ?", (pending["candidate_id"],)) == 1
    value = ok_value(alice_era.call(WITHDRAW, arguments))
    assert db_count(pool.paths, "sealed_bodies", "owner_id = ?", (pending["candidate_id"],)) == 0
    assert set(value) == {"receipt", "replayed", "key_destruction"}
    assert value["replayed"] is False
    assert value["key_destruction"] == "complete"
    _check_receipt(value["receipt"], "withdraw", "pending", "withdrawn")
    # One journal event, right after the capture's: the gate_failed call and the approval wrote none.
    assert value["receipt"]["cursor"] == pending["cursor"] + 1
    # Withdrawn is terminal, and the request is no longer open.
    again = alice_era.call(ADMIT, {"candidate_id": pending["candidate_id"], "idempotency_key": unique_key("adm")})
    assert_failure(again, "ALREADY_TERMINAL")
    assert host.confirmations(target=pending["candidate_id"]) == []


def test_forget_after_approval_executes(pool: Pool, alice_era: McpAgent, host: HostCli) -> None:
    word = unique_word("forgetme")
    pending = capture(alice_era, f"The {word} fact goes away.")
    outcome = admit(alice_era, pending["candidate_id"])["outcome"]
    record_id = outcome["record_id"]
    arguments = forget_args(record_id)
    assert_failure(alice_era.call(FORGET, arguments), "gate_failed")
    host.approve(host.only_request(record_id)["id"])
    value = ok_value(alice_era.call(FORGET, arguments))
    assert value["receipt"]["cursor"] == outcome["cursor"] + 1
    assert set(value) == {"receipt", "replayed", "projection_invalidation", "coverage_receipt_digest"}
    assert value["replayed"] is False
    assert value["projection_invalidation"] == "complete"
    assert DIGEST_RE.fullmatch(value["coverage_receipt_digest"])
    _check_receipt(value["receipt"], "tombstone", "accepted_current", "tombstoned")
    assert_failure(get(alice_era, record_id), "NOT_FOUND")
    assert found_ids(alice_era, word) == []
    assert db_count(pool.paths, "sealed_bodies", "owner_id = ?", (record_id,)) == 0


def test_gate_replay_after_execution_needs_no_new_approval(alice_modern: McpAgent, host: HostCli) -> None:
    _, record_id = remember(alice_modern, f"Replay forget {unique_word()}.")
    arguments = forget_args(record_id)
    assert_failure(alice_modern.call(FORGET, arguments), "gate_failed")
    host.approve(host.only_request(record_id)["id"])
    first = ok_value(alice_modern.call(FORGET, arguments))
    again = ok_value(alice_modern.call(FORGET, arguments))
    assert again["replayed"] is True
    assert {k: v for k, v in again.items() if k != "replayed"} == {k: v for k, v in first.items() if k != "replayed"}
    assert host.confirmations(target=record_id) == []
    assert len(host.confirmations(include_all=True, target=record_id)) == 1


def test_withdraw_replay_after_execution_needs_no_new_approval(alice_modern: McpAgent, host: HostCli) -> None:
    pending = capture(alice_modern, f"Replay withdraw {unique_word()}.")
    arguments = withdraw_args(pending["candidate_id"])
    assert_failure(alice_modern.call(WITHDRAW, arguments), "gate_failed")
    host.approve(host.only_request(pending["candidate_id"])["id"])
    first = ok_value(alice_modern.call(WITHDRAW, arguments))
    again = ok_value(alice_modern.call(WITHDRAW, arguments))
    assert again["replayed"] is True
    assert again["receipt"] == first["receipt"]
    assert again["key_destruction"] == first["key_destruction"]


def test_gate_approval_single_use_other_key_needs_new_approval(alice_modern: McpAgent, host: HostCli) -> None:
    pending = capture(alice_modern, f"Single use {unique_word()}.")
    approved_call = withdraw_args(pending["candidate_id"])
    assert_failure(alice_modern.call(WITHDRAW, approved_call), "gate_failed")
    host.approve(host.only_request(pending["candidate_id"])["id"])
    other_key = withdraw_args(pending["candidate_id"])
    assert_failure(alice_modern.call(WITHDRAW, other_key), "gate_failed")
    assert len(host.confirmations(target=pending["candidate_id"])) == 1  # a new request, for the other key
    ok_value(alice_modern.call(WITHDRAW, approved_call))
    statuses = sorted(item["status"] for item in host.confirmations(include_all=True, target=pending["candidate_id"]))
    assert statuses == ["consumed", "requested"]


def test_gate_approval_consumed_by_execution(alice_modern: McpAgent, host: HostCli) -> None:
    _, record_id = remember(alice_modern, f"Consumed {unique_word()}.")
    arguments = forget_args(record_id)
    assert_failure(alice_modern.call(FORGET, arguments), "gate_failed")
    confirmation_id = host.only_request(record_id)["id"]
    host.approve(confirmation_id)
    ok_value(alice_modern.call(FORGET, arguments))
    (row,) = host.confirmations(include_all=True, target=record_id)
    assert (row["id"], row["status"]) == (confirmation_id, "consumed")
    # A consumed approval cannot be approved again.
    assert host.run("confirmations", "approve", confirmation_id, check=False).returncode != 0


def test_gate_lapsed_approval_gate_failed(alice_modern: McpAgent, host: HostCli) -> None:
    pending = capture(alice_modern, f"Lapsed {unique_word()}.")
    arguments = withdraw_args(pending["candidate_id"])
    assert_failure(alice_modern.call(WITHDRAW, arguments), "gate_failed")
    host.approve(host.only_request(pending["candidate_id"])["id"], ttl_s=1)
    time.sleep(2)
    assert_failure(alice_modern.call(WITHDRAW, arguments), "gate_failed")
    # The candidate is still pending: admission can still decide it.
    assert admit(alice_modern, pending["candidate_id"])["outcome"]["status"] == "accepted"


def test_gate_denied_retry_stays_gate_failed(alice_modern: McpAgent, host: HostCli) -> None:
    _, record_id = remember(alice_modern, f"Denied {unique_word()}.")
    arguments = forget_args(record_id)
    assert_failure(alice_modern.call(FORGET, arguments), "gate_failed")
    denied = host.deny(host.only_request(record_id)["id"])
    assert denied["status"] == "denied"
    envelope = alice_modern.call(FORGET, arguments)
    assert_failure(envelope, "gate_failed")
    assert envelope["error"]["confirmation_request_id"] == denied["id"]
    assert "denied" in envelope["error"]["for_the_person"]
    assert_failure(alice_modern.call(FORGET, arguments), "gate_failed")
    assert ok_value(get(alice_modern, record_id))["record"]["state"] == "accepted_current"


def test_gate_denied_request_cannot_then_be_approved(alice_modern: McpAgent, host: HostCli) -> None:
    pending = capture(alice_modern, f"Deny then approve {unique_word()}.")
    arguments = withdraw_args(pending["candidate_id"])
    assert_failure(alice_modern.call(WITHDRAW, arguments), "gate_failed")
    confirmation_id = host.only_request(pending["candidate_id"])["id"]
    host.deny(confirmation_id)
    assert host.run("confirmations", "approve", confirmation_id, check=False).returncode != 0
    assert_failure(alice_modern.call(WITHDRAW, arguments), "gate_failed")


# -- what must not create a request ----------------------------------------------------------------


def test_withdraw_unknown_target_not_found_no_request(pool: Pool, alice_modern: McpAgent, host: HostCli) -> None:
    target = "cand_" + "z" * 26
    before = db_count(pool.paths, "confirmations")
    assert_failure(alice_modern.call(WITHDRAW, withdraw_args(target)), "NOT_FOUND")
    assert db_count(pool.paths, "confirmations") == before
    assert host.confirmations(include_all=True, target=target) == []


def test_forget_unknown_target_not_found_no_request(pool: Pool, alice_modern: McpAgent, host: HostCli) -> None:
    target = "mem_" + "z" * 26
    before = db_count(pool.paths, "confirmations")
    assert_failure(alice_modern.call(FORGET, forget_args(target)), "NOT_FOUND")
    assert db_count(pool.paths, "confirmations") == before
    assert host.confirmations(include_all=True, target=target) == []


def test_forget_out_of_scope_target_not_found_no_request(pool: Pool, host: HostCli) -> None:
    _, record_id = remember(pool.agent("alice", "auto"), f"Out of scope {unique_word()}.")
    assert_failure(pool.agent("tenant_b", "auto").call(FORGET, forget_args(record_id)), "NOT_FOUND")
    assert host.confirmations(include_all=True, target=record_id) == []


def test_withdraw_terminal_target_no_request(pool: Pool, alice_modern: McpAgent, host: HostCli) -> None:
    pending = capture(alice_modern, f"Rejected {'AKIA' + 'IOSFODNN7EXAMPLE'} {unique_word()}.")
    assert admit(alice_modern, pending["candidate_id"])["outcome"]["status"] == "rejected"
    assert_failure(alice_modern.call(WITHDRAW, withdraw_args(pending["candidate_id"])), "ALREADY_TERMINAL")
    assert host.confirmations(include_all=True, target=pending["candidate_id"]) == []


# -- principals and optional gates -----------------------------------------------------------------


def test_gate_approval_for_alice_does_not_pass_bob(pool: Pool, host: HostCli) -> None:
    alice, bob = pool.agent("alice", "auto"), pool.agent("bob", "auto")
    pending = capture(alice, f"Shared candidate {unique_word()}.")
    arguments = withdraw_args(pending["candidate_id"])
    assert_failure(alice.call(WITHDRAW, arguments), "gate_failed")
    host.approve(host.only_request(pending["candidate_id"])["id"])
    assert_failure(bob.call(WITHDRAW, arguments), "gate_failed")
    requests = host.confirmations(target=pending["candidate_id"])
    assert [item["principal"] for item in requests] == ["bob"]
    value = ok_value(alice.call(WITHDRAW, arguments))
    assert value["receipt"]["to_state"] == "withdrawn"


def test_confirm_mutations_binding_gates_capture(pool: Pool, host: HostCli) -> None:
    agent = pool.agent("alice_confirm", "auto")
    arguments = capture_args(f"Gated capture {unique_word()}.")
    journal = db_count(pool.paths, "journal")
    assert_failure(agent.call(CAPTURE, arguments), "gate_failed")
    assert db_count(pool.paths, "journal") == journal
    requests = [
        item for item in host.confirmations() if item["tool"] == CAPTURE and item["session"] == "session-confirm"
    ]
    assert len(requests) == 1
    host.approve(requests[0]["id"])
    value = ok_value(agent.call(CAPTURE, arguments))
    assert value["status"] == "committed_pending"
    assert value["record_digest"] == requests[0]["target"]


def test_confirm_mutations_binding_gates_admission(pool: Pool, host: HostCli) -> None:
    gated = pool.agent("alice_confirm", "auto")
    pending = capture(pool.agent("alice", "auto"), f"Gated admission {unique_word()}.")
    arguments = {"candidate_id": pending["candidate_id"], "idempotency_key": unique_key("gated")}
    assert_failure(gated.call(ADMIT, arguments), "gate_failed")
    request = host.only_request(pending["candidate_id"])
    assert request["tool"] == ADMIT
    host.approve(request["id"])
    outcome = ok_value(gated.call(ADMIT, arguments))["outcome"]
    assert outcome["status"] == "accepted"
    assert ok_value(get(gated, outcome["record_id"]))["record"]["record_id"] == outcome["record_id"]


def test_plain_binding_does_not_gate_capture_or_admission(pool: Pool, host: HostCli) -> None:
    agent = pool.agent("alice", "auto")
    pending = capture(agent, f"Ungated {unique_word()}.")
    assert admit(agent, pending["candidate_id"])["outcome"]["status"] == "accepted"
    assert host.confirmations(include_all=True, target=pending["candidate_id"]) == []


# -- lifecycle refusals leave no request ------------------------------------------------------------


def test_withdraw_accepted_candidate_illegal_transition_no_request(alice_modern: McpAgent, host: HostCli) -> None:
    candidate_id, _ = remember(alice_modern, f"Already admitted {unique_word()}.")
    assert_failure(alice_modern.call(WITHDRAW, withdraw_args(candidate_id)), "ILLEGAL_TRANSITION")
    assert host.confirmations(include_all=True, target=candidate_id) == []


def test_forget_tombstoned_record_new_key_already_terminal_no_request(
    pool: Pool, alice_modern: McpAgent, host: HostCli
) -> None:
    _, record_id = remember(alice_modern, f"Forgotten once {unique_word()}.")
    arguments = forget_args(record_id)
    assert_failure(alice_modern.call(FORGET, arguments), "gate_failed")
    host.approve(host.only_request(record_id)["id"])
    ok_value(alice_modern.call(FORGET, arguments))
    assert_failure(alice_modern.call(FORGET, forget_args(record_id)), "ALREADY_TERMINAL")
    assert len(host.confirmations(include_all=True, target=record_id)) == 1


# -- what the host sees and may do -------------------------------------------------------------------


def test_confirmation_request_says_what_will_be_destroyed(alice_modern: McpAgent, host: HostCli) -> None:
    pending = capture(alice_modern, f"Destroy summary {unique_word()}.")
    assert_failure(alice_modern.call(WITHDRAW, withdraw_args(pending["candidate_id"])), "gate_failed")
    _, record_id = remember(alice_modern, f"Destroy summary {unique_word()} record.")
    assert_failure(alice_modern.call(FORGET, forget_args(record_id)), "gate_failed")
    for target in (pending["candidate_id"], record_id):
        request = host.only_request(target)
        assert request["summary"]["destroys"], request
        assert any("data key" in item for item in request["summary"]["destroys"]), request


def test_cli_approval_longer_than_300s_refused(alice_modern: McpAgent, host: HostCli) -> None:
    pending = capture(alice_modern, f"Long approval {unique_word()}.")
    arguments = withdraw_args(pending["candidate_id"])
    assert_failure(alice_modern.call(WITHDRAW, arguments), "gate_failed")
    confirmation_id = host.only_request(pending["candidate_id"])["id"]
    refused = host.run("confirmations", "approve", confirmation_id, "--ttl", "301", check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip().count("\n") == 0 and refused.stderr.strip()
    assert host.only_request(pending["candidate_id"])["status"] == "requested"
    assert_failure(alice_modern.call(WITHDRAW, arguments), "gate_failed")
    assert host.approve(confirmation_id, ttl_s=300)["status"] == "approved"
    assert ok_value(alice_modern.call(WITHDRAW, arguments))["receipt"]["to_state"] == "withdrawn"


def test_cli_approve_unknown_id_refused(host: HostCli) -> None:
    refused = host.run("confirmations", "approve", "conf_doesnotexist", check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip()


def test_gate_approval_bound_to_exact_arguments(alice_modern: McpAgent, host: HostCli) -> None:
    pending = capture(alice_modern, f"Exact arguments {unique_word()}.")
    key = unique_key("exact")
    approved = withdraw_args(pending["candidate_id"], key=key, reason="reason:approved-one")
    assert_failure(alice_modern.call(WITHDRAW, approved), "gate_failed")
    host.approve(host.only_request(pending["candidate_id"])["id"])
    changed = withdraw_args(pending["candidate_id"], key=key, reason="reason:something-else")
    assert_failure(alice_modern.call(WITHDRAW, changed), "gate_failed")
    assert ok_value(alice_modern.call(WITHDRAW, approved))["receipt"]["to_state"] == "withdrawn"
    assert_failure(alice_modern.call(WITHDRAW, changed), "DIGEST_CONFLICT")


def test_confirm_mutations_admission_unknown_candidate_not_found_no_request(pool: Pool) -> None:
    requests = db_count(pool.paths, "confirmations")
    arguments = {"candidate_id": "cand_" + "y" * 26, "idempotency_key": unique_key("gated")}
    assert_failure(pool.agent("alice_confirm", "auto").call(ADMIT, arguments), "NOT_FOUND")
    assert db_count(pool.paths, "confirmations") == requests


def test_confirm_mutations_invalid_capture_no_request(pool: Pool) -> None:
    requests = db_count(pool.paths, "confirmations")
    arguments = {**capture_args(f"Invalid gated {unique_word()}."), "confirmed": True}
    assert_failure(pool.agent("alice_confirm", "auto").call(CAPTURE, arguments), "INVALID_SCHEMA")
    assert db_count(pool.paths, "confirmations") == requests
