"""The admission decision as a pure function: the order of rules, and what the tombstone guard may change."""

from __future__ import annotations

from engram_memory.engine.admission.decision import CandidateFacts, Verdict, decide
from engram_memory.engine.admission.policy import AdmissionPolicy

POLICY = AdmissionPolicy().with_digest()
CLEAN = CandidateFacts(size_bytes=100, citation_count=1, has_attestation=False, secret_categories=())


def test_clean_candidate_is_accepted_and_names_the_policy() -> None:
    decision = decide(POLICY, CLEAN, duplicate_of=None, tombstoned=False)
    assert decision.verdict is Verdict.ACCEPT
    assert (decision.policy_id, decision.policy_version, decision.policy_digest) == ("default", 1, POLICY.digest)


def test_secret_is_rejected_even_when_duplicate_or_tombstoned() -> None:
    facts = CandidateFacts(100, 1, False, ("jwt",))
    for duplicate, tombstoned in [(None, False), ("mem_x", False), (None, True)]:
        decision = decide(POLICY, facts, duplicate_of=duplicate, tombstoned=tombstoned)
        assert decision.verdict is Verdict.REJECT and decision.reasons == ("secret:jwt",)


def test_policy_limits_reject() -> None:
    strict = AdmissionPolicy(min_citations=2, require_attestation=True, max_payload_bytes=50).with_digest()
    decision = decide(strict, CLEAN, duplicate_of=None, tombstoned=True)
    assert decision.verdict is Verdict.REJECT
    assert decision.reasons == ("size", "citations", "attestation")


def test_duplicate_rule_comes_before_tombstone_guard_and_review() -> None:
    review = AdmissionPolicy(mode="review").with_digest()
    decision = decide(review, CLEAN, duplicate_of="mem_x", tombstoned=True)
    assert decision.verdict is Verdict.DUPLICATE and decision.duplicate_of == "mem_x"


def test_tombstone_guard_turns_acceptance_into_adjudication() -> None:
    decision = decide(POLICY, CLEAN, duplicate_of=None, tombstoned=True)
    assert decision.verdict is Verdict.ADJUDICATE and decision.reasons == ("tombstone_guard",)


def test_review_mode_adjudicates_what_would_be_accepted() -> None:
    decision = decide(AdmissionPolicy(mode="review").with_digest(), CLEAN, duplicate_of=None, tombstoned=False)
    assert decision.verdict is Verdict.ADJUDICATE and decision.reasons == ("review_mode",)


def test_policy_digest_changes_with_any_setting() -> None:
    assert AdmissionPolicy(max_retention_days=30).with_digest().digest != POLICY.digest
    assert AdmissionPolicy().with_digest().digest == POLICY.digest
