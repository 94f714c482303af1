"""The six tools in-process on a real store (both of them): the happy paths and the lifecycle around them."""

from __future__ import annotations

from engram_memory.contract.ids import RECORD_ID_RE
from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE, capture_args, unique_key
from tests.support.raw import raw_vault, readable_in_store, rows


def test_capture_returns_committed_pending_candidate(agent: InProcessAgent) -> None:
    value = agent.capture("Use UTC timestamps everywhere in the billing service.")
    assert value["status"] == "committed_pending"
    assert value["candidate_id"].startswith("cand_")
    assert not RECORD_ID_RE.fullmatch(value["candidate_id"])
    assert value["record_digest"].startswith("sha256:") and value["cursor"] == 1
    assert set(value) == {"status", "candidate_id", "record_digest", "cursor", "transaction_receipt_digest"}


def test_pending_candidate_is_not_searchable_or_stored_in_clear(agent: InProcessAgent, paths: HostPaths) -> None:
    agent.capture("The orchestrator pins kubelet to version 1.31 on every node.")
    assert agent.found_ids("kubelet orchestrator version") == []
    assert readable_in_store(paths, ["kubelet", "orchestrator"]) == []


def test_admission_accepts_and_record_becomes_findable(agent: InProcessAgent) -> None:
    captured = agent.capture("Release trains leave every Tuesday at 10:00 UTC.")
    outcome = agent.admit(captured["candidate_id"])
    assert outcome["status"] == "accepted"
    assert RECORD_ID_RE.fullmatch(outcome["record_id"])
    assert set(outcome) == {
        "status",
        "candidate_id",
        "record_id",
        "cursor",
        "decision_receipt_digest",
        "transaction_receipt_digest",
    }
    assert agent.found_ids("when do release trains leave") == [outcome["record_id"]]
    read = agent.get(outcome["record_id"])
    assert read["ok"]
    record = read["output"]["value"]["record"]
    assert record["components"][0]["text"] == "Release trains leave every Tuesday at 10:00 UTC."
    assert record["retention"] == {"derivative_rule": "make-ineligible"}
    assert record["provenance"]["principal"] == "alice"


def test_admission_of_identical_content_is_duplicate_exact(agent: InProcessAgent, paths: HostPaths) -> None:
    first = agent.remember("Feature flags live in the config service, never in code.")
    again = agent.capture("Feature flags live in the config service, never in code.")
    outcome = agent.admit(again["candidate_id"])
    assert outcome["status"] == "duplicate_exact"
    assert outcome["record_id"] == first
    assert rows(paths, "SELECT count(*) FROM records") == [(1,)]
    assert rows(paths, "SELECT count(*) FROM sealed_bodies WHERE owner_id = ?", again["candidate_id"]) == [(0,)]


def test_review_mode_sends_candidates_to_adjudication(agent: InProcessAgent, paths: HostPaths) -> None:
    paths.policy.write_text(paths.policy.read_text().replace('mode = "auto"', 'mode = "review"'))
    captured = agent.capture("Database migrations run before the deploy, never after.")
    outcome = agent.admit(captured["candidate_id"])
    assert outcome["status"] == "pending_adjudication" and "record_id" not in outcome
    again = agent.admit(captured["candidate_id"])
    assert again["status"] == "pending_adjudication"
    assert agent.found_ids("database migrations deploy") == []


def test_rejected_candidate_loses_its_data_key(agent: InProcessAgent, paths: HostPaths) -> None:
    secret = "AKIA" + "IOSFODNN7EXAMPLE"
    captured = agent.capture(f"The deploy user has access key {secret} for the bucket.")
    outcome = agent.admit(captured["candidate_id"])
    assert outcome["status"] == "rejected"
    assert rows(paths, "SELECT count(*) FROM sealed_bodies WHERE owner_id = ?", captured["candidate_id"]) == [(0,)]
    assert agent.found_ids("deploy user access key bucket") == []


def _keys(paths: HostPaths, owner_id: str) -> tuple[int, int]:
    """(held, recorded as destroyed) for one owner in the key vault."""
    with raw_vault(paths) as db:
        return db.count("data_keys", "owner_id = ?", (owner_id,)), db.count("shredded", "owner_id = ?", (owner_id,))


def test_every_decided_candidate_loses_its_own_data_key_and_a_record_gets_its_own(
    agent: InProcessAgent, paths: HostPaths
) -> None:
    accepted = agent.capture("Service owners answer pages within fifteen minutes.")
    record_id = agent.admit(accepted["candidate_id"])["record_id"]
    duplicate = agent.capture("Service owners answer pages within fifteen minutes.")
    assert agent.admit(duplicate["candidate_id"])["status"] == "duplicate_exact"
    rejected = agent.capture("Password: hunter2hunter2 for the staging box.")
    assert agent.admit(rejected["candidate_id"])["status"] == "rejected"
    for candidate in (accepted, duplicate, rejected):
        assert _keys(paths, candidate["candidate_id"]) == (0, 1)
    assert _keys(paths, record_id) == (1, 0)
    assert agent.get(record_id)["ok"]


def test_admission_on_terminal_candidate_is_already_terminal(agent: InProcessAgent) -> None:
    captured = agent.capture("Password: hunter2hunter2 for the staging box.")
    assert agent.admit(captured["candidate_id"])["status"] == "rejected"
    args = {"candidate_id": captured["candidate_id"], "idempotency_key": unique_key("again")}
    assert agent.error_code("engram_memory_request_admission", args) == "ALREADY_TERMINAL"


def test_admission_on_accepted_candidate_is_illegal_transition(agent: InProcessAgent) -> None:
    captured = agent.capture("Service owners answer pages within fifteen minutes.")
    agent.admit(captured["candidate_id"])
    args = {"candidate_id": captured["candidate_id"], "idempotency_key": unique_key("again")}
    assert agent.error_code("engram_memory_request_admission", args) == "ILLEGAL_TRANSITION"


def test_record_valid_in_the_future_is_not_eligible_until_then(
    served: Engine, paths: HostPaths, clock: ManualClock
) -> None:
    agent = InProcessAgent(served, bind(paths, lifetime_s=7 * 86_400).binding)
    record_id = agent.remember("The new VPN endpoint takes over next month.", valid_from_ms=clock.now + 86_400_000)
    assert agent.found_ids("new VPN endpoint") == []
    assert agent.get(record_id)["error"]["code"] == "NOT_FOUND"
    clock.advance(86_400_001)
    assert agent.found_ids("new VPN endpoint") == [record_id]


def test_record_past_its_expiry_is_not_eligible(agent: InProcessAgent, clock: ManualClock) -> None:
    from engram_memory.contract.instants import format_instant

    expires = format_instant(clock.now + 60_000)
    record_id = agent.remember(
        "The freeze window ends on Friday.", retention={"derivative_rule": "make-ineligible", "expires_at": expires}
    )
    assert agent.found_ids("freeze window") == [record_id]
    clock.advance(60_000)
    assert agent.found_ids("freeze window") == []
    assert agent.get(record_id)["error"]["code"] == "NOT_FOUND"


def test_retention_rules_follow_host_policy(agent: InProcessAgent, paths: HostPaths, clock: ManualClock) -> None:
    from engram_memory.contract.instants import format_instant

    retain = capture_args("Keep derived summaries.", retention={"derivative_rule": "retain"})
    assert agent.error_code("engram_memory_capture", retain) == "UNAUTHORIZED"
    past = capture_args("x", retention={"derivative_rule": "make-ineligible", "expires_at": format_instant(clock.now)})
    assert agent.error_code("engram_memory_capture", past) == "INVALID_SCHEMA"
    far = format_instant(clock.now + 366 * 86_400_000)
    beyond = capture_args("x", retention={"derivative_rule": "make-ineligible", "expires_at": far})
    assert agent.error_code("engram_memory_capture", beyond) == "UNAUTHORIZED"
    family = capture_args("x", reconciliation={"family_refs": ["family:a"]})
    assert agent.error_code("engram_memory_capture", family) == "UNAUTHORIZED"
    paths.policy.write_text(
        paths.policy.read_text()
        .replace("retain_principals = []", 'retain_principals = ["alice"]')
        .replace("consented_families = []", 'consented_families = ["family:a"]')
    )
    assert agent.value("engram_memory_capture", retain)["status"] == "committed_pending"
    assert agent.value("engram_memory_capture", family)["status"] == "committed_pending"


def test_capture_replay_keeps_first_retention_after_policy_changes(agent: InProcessAgent, paths: HostPaths) -> None:
    paths.policy.write_text(paths.policy.read_text().replace("retain_principals = []", 'retain_principals = ["alice"]'))
    args = capture_args("Summaries may be kept.", retention={"derivative_rule": "retain"})
    first = agent.value("engram_memory_capture", args)
    paths.policy.write_text(paths.policy.read_text().replace('retain_principals = ["alice"]', "retain_principals = []"))
    replay = agent.value("engram_memory_capture", args)
    assert replay == {**first, "status": "duplicate_exact"}


def test_redaction_follows_host_policy(agent: InProcessAgent, paths: HostPaths) -> None:
    record_id = agent.remember("Runbooks live in the ops wiki.")
    paths.policy.write_text(
        paths.policy.read_text().replace("redact_fields = []", 'redact_fields = ["citations.locator", "provenance"]')
    )
    packet = agent.get(record_id)["output"]["value"]
    assert packet["redacted_fields"] == ["citations.locator", "provenance"]
    assert "provenance" not in packet["record"] and "locator" not in packet["record"]["citations"][0]
    assert packet["record"]["record_id"] == record_id


def test_get_returns_full_read_receipt(agent: InProcessAgent) -> None:
    record_id = agent.remember("Error budgets reset on the first of each month.")
    packet = agent.get(record_id)["output"]["value"]
    assert set(packet) == {"record", "redacted_fields", "redaction_receipt_digest", "read_receipt", "packet_digest"}
    assert set(packet["read_receipt"]) == {
        "record_id",
        "record_digest",
        "valid_as_of",
        "system_as_of",
        "validated_through_cursor",
        "authorization_receipt_digest",
        "revalidation_receipt_digest",
        "checked_at",
        "receipt_digest",
    }
    assert packet["read_receipt"]["record_id"] == record_id


def test_other_principal_in_same_workspace_shares_memory(
    served: Engine,
    paths: HostPaths,
) -> None:
    alice = InProcessAgent(served, bind(paths).binding)
    bob = InProcessAgent(served, bind(paths, principal="bob").binding)
    record_id = alice.remember("Hand-off: the cache warmer is paused until Monday.")
    assert bob.found_ids("cache warmer paused") == [record_id]


def test_purpose_ref_is_checked_on_every_tool_that_carries_it(agent: InProcessAgent) -> None:
    import pytest

    from engram_memory.contract.errors import ProtocolFault

    wrong = capture_args("x", purpose="purpose:other")
    for tool, args in [
        ("engram_memory_search", {"query": "q", "purpose_ref": "purpose:other"}),
        ("engram_memory_get", {"record_id": "mem_abc", "purpose_ref": "purpose:other"}),
        ("engram_memory_capture", wrong),
    ]:
        with pytest.raises(ProtocolFault) as caught:
            agent.call(tool, args)
        assert caught.value.code == -32603
    assert agent.search("q")["records"] == []
    assert PURPOSE
