"""Answers that explain themselves (reasons, never matched text), and one fact one memory (same text is
`duplicate_exact`), on both stores."""

from __future__ import annotations

import pytest

from engram_memory.engine.admission import review
from engram_memory.engine.admission.review import CandidateDecided
from engram_memory.engine.engine import Engine
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key

ADMIT = "engram_memory_request_admission"
KEY_ID = "AKIA" + "IOSFODNN7EXAMPLE"
HOST = "host:reviewer"


def _outcome(agent: InProcessAgent, candidate_id: str, key: str | None = None) -> dict[str, object]:
    args = {"candidate_id": candidate_id, "idempotency_key": key or unique_key("admit")}
    outcome: dict[str, object] = agent.value(ADMIT, args)["outcome"]
    return outcome


def test_a_rejected_admission_names_its_rules_and_detectors_never_the_text(
    agent: InProcessAgent, steered: Engine
) -> None:
    candidate_id = agent.capture(f"The deploy user key id is {KEY_ID} in us-east-1.")["candidate_id"]
    outcome = _outcome(agent, candidate_id)
    assert outcome["status"] == "rejected" and outcome["reasons"] == ["secret:cloud_key"]
    assert KEY_ID not in str(outcome)
    with pytest.raises(CandidateDecided) as decided:
        review.show_candidate(steered.deps, candidate_id)
    assert decided.value.reasons == ("secret:cloud_key",) and KEY_ID not in str(decided.value)


def test_a_held_admission_says_why_and_the_persons_decision_reaches_the_same_key(
    paths: HostPaths, agent: InProcessAgent, steered: Engine
) -> None:
    paths.policy.write_text(DEFAULT_POLICY_TOML.replace('mode = "auto"', 'mode = "review"'), encoding="utf-8")
    accepted_id = agent.capture("Design reviews happen on Thursdays.")["candidate_id"]
    rejected_id = agent.capture("Retros rotate facilitators monthly.")["candidate_id"]
    keys = {accepted_id: unique_key("admit"), rejected_id: unique_key("admit")}
    for candidate_id, key in keys.items():
        held = _outcome(agent, candidate_id, key)
        assert (held["status"], held["reasons"]) == ("pending_adjudication", ["policy:review_all"])
    review.accept_candidate(steered.deps, accepted_id, decided_by=HOST)
    review.reject_candidate(steered.deps, rejected_id, decided_by=HOST)
    accepted = agent.value(ADMIT, {"candidate_id": accepted_id, "idempotency_key": keys[accepted_id]})
    rejected = agent.value(ADMIT, {"candidate_id": rejected_id, "idempotency_key": keys[rejected_id]})
    assert accepted["replayed"] is True and accepted["outcome"]["status"] == "accepted"
    assert "reasons" not in accepted["outcome"]
    assert rejected["replayed"] is True
    assert (rejected["outcome"]["status"], rejected["outcome"]["reasons"]) == ("rejected", ["review:person"])


def test_the_same_text_captured_twice_is_one_memory(agent: InProcessAgent) -> None:
    first = agent.remember("Payments deploys need two approvals.")
    again = agent.capture(
        "payments   deploys need TWO approvals",
        key=unique_key("again"),
        valid_from_ms=1_800_000_000_000,
        source_ref="doc:other-handbook",
    )
    outcome = _outcome(agent, again["candidate_id"])
    assert (outcome["status"], outcome["record_id"], outcome["reasons"]) == (
        "duplicate_exact",
        first,
        ["duplicate:same_text"],
    )
    assert agent.found_ids("payments deploys approvals") == [first]


def test_forgetting_the_one_memory_leaves_no_copy(agent: InProcessAgent, steered: Engine) -> None:
    record_id = agent.remember("Feature flags are removed within a quarter.")
    agent.admit(agent.capture("Feature flags are removed within a quarter!", key=unique_key("twice"))["candidate_id"])
    forget = {"record_id": record_id, "idempotency_key": unique_key("forget"), "reason_ref": "ticket:9"}
    assert agent.error_code("engram_memory_forget", forget) == "gate_failed"
    (row, _), *_ = steered.confirmations()
    steered.approve_confirmation(row.confirmation_id, decided_by=HOST, ttl_ms=60_000)
    agent.value("engram_memory_forget", forget)
    assert agent.found_ids("feature flags removed quarter") == []


@pytest.mark.parametrize(
    ("text", "context"),
    [
        ("Payments deploys need three approvals.", None),  # one word differs: near, not the same
        ("Payments deploys need two approvals.", "Said in the incident review."),  # more text beside it
    ],
)
def test_other_text_is_another_memory(agent: InProcessAgent, text: str, context: str | None) -> None:
    first = agent.remember("Payments deploys need two approvals.")
    other = agent.value(
        ADMIT, {"candidate_id": agent.capture(text, context=context)["candidate_id"], "idempotency_key": unique_key()}
    )
    assert other["outcome"]["status"] == "accepted" and other["outcome"]["record_id"] != first


def test_a_person_accepting_a_held_copy_of_current_text_gets_that_record(
    paths: HostPaths, agent: InProcessAgent, steered: Engine
) -> None:
    held = agent.capture("Incident commanders rotate weekly.")["candidate_id"]
    paths.policy.write_text(DEFAULT_POLICY_TOML.replace('mode = "auto"', 'mode = "review"'), encoding="utf-8")
    _outcome(agent, held)
    paths.policy.write_text(DEFAULT_POLICY_TOML, encoding="utf-8")
    current = agent.remember("Incident commanders rotate weekly", source_ref="doc:runbook")
    decision = review.accept_candidate(steered.deps, held, decided_by=HOST)
    assert (decision.status, decision.record_id) == ("duplicate_exact", current)
    assert decision.reasons == ("host_review", "duplicate_text")
