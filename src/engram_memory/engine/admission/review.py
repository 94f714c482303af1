"""The host's review queue: a human decides what the admission policy left to a person.

Host path only. Each decision is one write transaction journaled in the candidate's own scope with the
host as actor, and it rewrites the agent's recorded `pending_adjudication` answers so that the agent's
replay of its own key returns the decision.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engram_memory.contract.errors import ContractError
from engram_memory.contract.states import CandidateState, Operation, RecordState, candidate_transition
from engram_memory.contract.tools import Tool
from engram_memory.engine.admission.decision import Decision, Verdict, rejection_reasons, shown_reasons
from engram_memory.engine.admission.effects import EFFECTS, answer_outcome, apply_decision
from engram_memory.engine.admission.families import FamilyTx, current_members, family_refs, plan_families, plan_of
from engram_memory.engine.admission.near_duplicates import near_matches
from engram_memory.engine.admission.policy import AdmissionPolicy
from engram_memory.engine.admission.request import candidate_facts, still_in_force
from engram_memory.engine.admission.same_text import same_text_record
from engram_memory.engine.deps import Deps
from engram_memory.engine.mutation import host_actor, reason_ref_ok
from engram_memory.engine.ports.review import ReviewTx
from engram_memory.engine.ports.store import CandidateRow, JournalEvent, StoreTx
from engram_memory.engine.receipts import decision_receipt_digest, transaction_receipt_digest
from engram_memory.engine.refusals import Refusal, Refused
from engram_memory.engine.sealing.bodies import read_body, read_payload
from engram_memory.engine.secrets import CATEGORIES, SecretFinding, scan_value

HOST_REVIEW = "host_review"
DEFAULT_QUEUE_LIMIT = 100
_ALL_CATEGORIES = frozenset(CATEGORIES)


class ReviewError(Refused):
    """A person's review turned down (unknown id, not pending, the policy forbids it); nothing written."""


class CandidateDecided(ReviewError):
    """The candidate was decided already: its body is gone, what remains is its row and the reasons."""

    def __init__(self, candidate: CandidateRow) -> None:
        self.candidate = candidate
        self.reasons = tuple(shown_reasons(candidate.review_reasons))
        why = f" ({', '.join(self.reasons)})" if self.reasons else ""
        super().__init__(
            Refusal.CANDIDATE_DECIDED, candidate_id=candidate.candidate_id, state=candidate.state, reasons=why
        )


@dataclass(frozen=True, slots=True)
class CandidateView:
    """A pending candidate decrypted for the human, with every detector finding located in it."""

    candidate: CandidateRow
    payload: Mapping[str, Any]
    evidence: Mapping[str, Any]
    findings: tuple[SecretFinding, ...]
    family_members: tuple[FamilyMember, ...] = ()
    near_matches: tuple[NearMatchView, ...] = ()


@dataclass(frozen=True, slots=True)
class NearMatchView:
    """A current record the near-duplicate rule found near-identical to the candidate, shown beside it."""

    record_id: str
    similarity: float
    payload: Mapping[str, Any]
    semantic: float | None = None


@dataclass(frozen=True, slots=True)
class FamilyMember:
    """A current record that shares a family with the candidate, shown beside it: what accepting would
    supersede (`supersede` rule, older) or what a person must weigh it against."""

    family_ref: str
    mode: str
    record_id: str
    valid_from_ms: int
    payload: Mapping[str, Any]
    superseded_on_accept: bool


@dataclass(frozen=True, slots=True)
class ReviewDecision:
    candidate: CandidateRow
    status: str
    reasons: tuple[str, ...]
    record_id: str | None
    cursor: int
    event_id: str
    decision_receipt_digest: str
    decided_by: str
    decided_at_ms: int
    answers_rewritten: int
    key_destroyed: bool
    superseded: tuple[str, ...] = ()


def review_queue(deps: Deps, *, include_unsent: bool = False, limit: int = DEFAULT_QUEUE_LIMIT) -> list[CandidateRow]:
    """Metadata only, oldest first, across every scope. Raises ContractError STORE_UNAVAILABLE."""
    with deps.store.read() as tx:
        return tx.list_review_queue(include_unsent=include_unsent, limit=limit)


def show_candidate(deps: Deps, candidate_id: str) -> CandidateView:
    """Decrypts a pending candidate for the human and marks what the detector finds.

    Every category is scanned, personal data included, whatever the policy enforces: the person
    deciding should see everything a detector can point at. Raises CandidateDecided (a ReviewError) for a
    candidate decided already, ReviewError, ContractError
    BLOB_MISSING or STORE_UNAVAILABLE.
    """
    with deps.store.read() as tx:
        candidate = _find(tx, candidate_id)
        if candidate.state != CandidateState.PENDING.value:
            raise CandidateDecided(candidate)
        body = json.loads(read_body(deps, tx, candidate.scope, candidate_id, "candidate"))
        members = _family_members(deps, tx, candidate, body["payload"])
        near = _near_matches(deps, tx, candidate, body["payload"])
    findings = scan_value(body, categories=_ALL_CATEGORIES)
    return CandidateView(candidate, body["payload"], body["evidence"], tuple(findings), members, near)


def _near_matches(
    deps: Deps, tx: StoreTx, candidate: CandidateRow, payload: Mapping[str, Any]
) -> tuple[NearMatchView, ...]:
    if "near_duplicate" not in candidate.review_reasons:
        return ()

    @functools.cache
    def payload_of(record_id: str) -> Mapping[str, Any]:  # the matching and the view need the same few
        return read_payload(deps, tx, candidate.scope, record_id, "record")

    found = near_matches(
        tx,
        candidate.scope,
        deps.policies.current(),
        payload,
        deps.clock.now_ms(),
        semantic=deps.semantic,
        payload_of=payload_of,
    )
    return tuple(NearMatchView(m.record_id, m.similarity, payload_of(m.record_id), m.semantic) for m in found)


def _family_members(
    deps: Deps, tx: StoreTx, candidate: CandidateRow, payload: Mapping[str, Any]
) -> tuple[FamilyMember, ...]:
    if not family_refs(payload):
        return ()
    policy = deps.policies.current()
    members = current_members(deps.cursor_key, tx, candidate.scope, payload)
    plan = plan_of(policy, payload, members)
    return tuple(
        FamilyMember(
            family_ref=ref,
            mode=policy.family_mode(ref),
            record_id=record.record_id,
            valid_from_ms=record.valid_from_ms,
            payload=read_payload(deps, tx, candidate.scope, record.record_id, "record"),
            superseded_on_accept=record.record_id in plan.supersedes,
        )
        for ref, record in members
    )


def accept_candidate(
    deps: Deps,
    candidate_id: str,
    *,
    decided_by: str,
    reason_ref: str | None = None,
    supersede: bool | None = None,
) -> ReviewDecision:
    """A human accepts: a new searchable record, or the existing one when identical content is current.

    With families: `supersede=None` follows the policy (its `supersede` rule makes the older current
    members historical, the others stay), `True` makes every current member of the candidate's families
    historical, `False` keeps them all current beside the new record.
    Raises ReviewError (unknown, not pending, the policy's rejection rules forbid it), ContractError
    POLICY_UNAVAILABLE, POLICY_STALE, BLOB_MISSING, STORE_UNAVAILABLE, MUTATION_OUTCOME_UNKNOWN.
    """
    return _decide(deps, candidate_id, accept=True, decided_by=decided_by, reason_ref=reason_ref, supersede=supersede)


def reject_candidate(
    deps: Deps, candidate_id: str, *, decided_by: str, reason_ref: str | None = None
) -> ReviewDecision:
    """A human rejects: the body and its data key are destroyed. Raises as `accept_candidate`."""
    return _decide(deps, candidate_id, accept=False, decided_by=decided_by, reason_ref=reason_ref)


def _find(tx: ReviewTx, candidate_id: str) -> CandidateRow:
    candidate = tx.find_candidate(candidate_id)
    if candidate is None:
        raise ReviewError(Refusal.NO_SUCH_CANDIDATE, candidate_id=candidate_id)
    return candidate


def _displaced(
    deps: Deps,
    tx: FamilyTx,
    candidate: CandidateRow,
    policy: AdmissionPolicy,
    payload: Mapping[str, Any],
    supersede: bool | None,
) -> tuple[str, ...]:
    """The current records a human acceptance makes historical (see accept_candidate)."""
    if supersede is False or not family_refs(payload):
        return ()
    plan = plan_families(deps.cursor_key, tx, candidate.scope, policy, payload)
    return plan.supersedes + plan.weigh_against if supersede else plan.supersedes


def _decide(
    deps: Deps,
    candidate_id: str,
    *,
    accept: bool,
    decided_by: str,
    reason_ref: str | None,
    supersede: bool | None = None,
) -> ReviewDecision:
    """The person's decision, as an agent's admission runs: the facts, the decision, its effects, and the
    policy still in force at the commit (request.py); then every pending answer replays it."""
    if not reason_ref_ok(reason_ref):
        raise ReviewError(Refusal.REASON_REF_INVALID)
    policy = deps.policies.current()
    now_ms = deps.clock.now_ms()
    with deps.store.write() as tx:
        candidate = _find(tx, candidate_id)
        try:
            candidate_transition(Operation.ACCEPT if accept else Operation.REJECT, CandidateState(candidate.state))
        except ContractError as exc:
            raise ReviewError(
                Refusal.CANDIDATE_NOT_PENDING, code=exc.code.value, candidate_id=candidate_id, state=candidate.state
            ) from exc
        decision, plaintext, payload = _person_decision(deps, tx, candidate, policy, accept, supersede, now_ms)
        decision_digest = decision_receipt_digest(candidate_id, decision, now_ms)
        events, record_id = apply_decision(
            deps,
            tx,
            candidate,
            decision,
            decision_digest,
            actor=host_actor(decided_by),
            at_ms=now_ms,
            plaintext=plaintext,
            reason_ref=reason_ref,
            payload=payload,
        )
        still_in_force(deps, policy, decided_at_ms=now_ms)
        rewritten = _rewrite_answers(tx, candidate, decision, record_id, events, decision_digest)
    # The body is gone in the committed state; now its key and the erased pages go too.
    key_destroyed = deps.vault.destroy([candidate_id], deps.clock.now_ms())
    deps.store.erase_physically()
    return ReviewDecision(
        candidate=candidate,
        status=EFFECTS[decision.verdict].status,
        reasons=decision.reasons,
        record_id=record_id,
        cursor=events[-1].cursor,
        event_id=events[0].event_id,
        decision_receipt_digest=decision_digest,
        decided_by=decided_by,
        decided_at_ms=now_ms,
        answers_rewritten=rewritten,
        key_destroyed=key_destroyed,
        superseded=decision.supersedes,
    )


def _person_decision(
    deps: Deps,
    tx: StoreTx,
    candidate: CandidateRow,
    policy: AdmissionPolicy,
    accept: bool,
    supersede: bool | None,
    now_ms: int,
) -> tuple[Decision, bytes | None, Mapping[str, Any] | None]:
    """What a person's accept or reject becomes, with the body and payload when they had to be opened.

    A person may overrule the tombstone guard and review mode, never the rejection rules: a secret must
    not reach the index because someone clicked accept.
    """
    scope, candidate_id = candidate.scope, candidate.candidate_id
    stamp = (policy.policy_id, policy.version, policy.digest)
    if not accept:
        return Decision(Verdict.REJECT, (HOST_REVIEW,), *stamp), None, None
    refused = rejection_reasons(policy, candidate_facts(candidate))
    if refused:
        raise ReviewError(Refusal.POLICY_REJECTS, candidate_id=candidate_id, reasons=", ".join(refused))
    duplicate_of = tx.find_record_by_digest(scope, candidate.payload_digest, RecordState.ACCEPTED_CURRENT.value)
    if duplicate_of is not None:
        return Decision(Verdict.DUPLICATE, (HOST_REVIEW, "duplicate_exact"), *stamp, duplicate_of), None, None
    # Opened once: compared with the current records, families read from it, the record sealed from it.
    plaintext = read_body(deps, tx, scope, candidate_id, "candidate")
    payload = json.loads(plaintext)["payload"]
    same = same_text_record(
        tx, scope, payload, now_ms, lambda record_id: read_payload(deps, tx, scope, record_id, "record")
    )
    if same is not None:
        return Decision(Verdict.DUPLICATE, (HOST_REVIEW, "duplicate_text"), *stamp, same), plaintext, payload
    displaced = _displaced(deps, tx, candidate, policy, payload, supersede)
    return Decision(Verdict.ACCEPT, (HOST_REVIEW,), *stamp, None, displaced), plaintext, payload


def _rewrite_answers(
    tx: ReviewTx,
    candidate: CandidateRow,
    decision: Decision,
    record_id: str | None,
    events: list[JournalEvent],
    decision_digest: str,
) -> int:
    """Every earlier `pending_adjudication` answer for this candidate now replays the human's decision.

    Each keeps its own transaction receipt: it binds that agent's key to the event that decided it.
    """
    answers = tx.pending_admission_answers(candidate.scope, candidate.candidate_id)
    for answer in answers:
        outcome = answer_outcome(
            candidate.candidate_id,
            decision,
            decision_digest,
            record_id=record_id,
            cursor=events[-1].cursor,
            transaction_receipt=transaction_receipt_digest(Tool.REQUEST_ADMISSION.value, answer.key, events),
        )
        tx.rewrite_admission_answer(answer.scope, answer.principal, answer.key, {"outcome": outcome})
    return len(answers)
