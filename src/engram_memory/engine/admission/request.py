"""Request admission: the host's policy decides, the engine applies it atomically.

Accepting re-seals the body under the new record's own data key, indexes it, and destroys the
candidate's copy, so exactly one readable body exists. Rejecting destroys the candidate's key.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from engram_memory.contract.arguments import AdmissionArguments
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.states import CandidateState, Operation, RecordState, candidate_transition
from engram_memory.contract.tools import Tool
from engram_memory.engine.admission.decision import CandidateFacts, Decision, Verdict, decide, rejection_reasons
from engram_memory.engine.admission.effects import answer_outcome, apply_decision
from engram_memory.engine.admission.families import FamilyPlan, family_refs, plan_families
from engram_memory.engine.admission.near_duplicates import is_near_duplicate
from engram_memory.engine.admission.policy import DECISION_MAX_AGE_MS, AdmissionPolicy
from engram_memory.engine.admission.same_text import same_text_record
from engram_memory.engine.calls import Call
from engram_memory.engine.deps import Deps
from engram_memory.engine.idempotency import replayed_response
from engram_memory.engine.lifecycle.gate import GateHeld, GateRequest, check_gate, consume
from engram_memory.engine.lifecycle.tombstone_guard import candidate_fingerprints, guard_key
from engram_memory.engine.mutation import head_of, remember_response, run_mutation
from engram_memory.engine.ports.agent_tx import TombstonesTx
from engram_memory.engine.ports.store import CandidateRow, JournalEvent, StoreTx
from engram_memory.engine.recall.semantic import Embedded, embed_record
from engram_memory.engine.receipts import decision_receipt_digest, transaction_receipt_digest
from engram_memory.engine.sealing.bodies import read_body, read_payload

_CANDIDATE_BODY_ENDED = frozenset({"accepted", "rejected", "duplicate_exact"})
_PLAINTEXT_LIVES_ON = frozenset({"accepted", "duplicate_exact"})
logger = logging.getLogger(__name__)


def request_admission(deps: Deps, call: Call, arguments: AdmissionArguments) -> dict[str, Any]:
    """Raises ContractError NOT_FOUND, ALREADY_TERMINAL, ILLEGAL_TRANSITION, DIGEST_CONFLICT,
    POLICY_UNAVAILABLE, POLICY_STALE, gate_failed (when required), BLOB_MISSING, STORE_UNAVAILABLE,
    MUTATION_OUTCOME_UNKNOWN."""
    policy = deps.policies.current()

    def destroy_candidate_key(result: dict[str, Any]) -> dict[str, Any]:
        # Once decided (other than by a human later), the candidate's own key has no body left to open.
        # Admitted content lives on in a record, so its old key only needs retiring; rejected content
        # (a secret, say) must leave the disk now.
        status = result["outcome"]["status"]
        if status in _PLAINTEXT_LIVES_ON:
            deps.vault.retire([arguments.candidate_id], deps.clock.now_ms())
        elif status in _CANDIDATE_BODY_ENDED:
            deps.vault.destroy([arguments.candidate_id], deps.clock.now_ms())
        return result

    ahead = _embedded_ahead(deps, call, arguments.candidate_id)
    return run_mutation(
        deps,
        call.scope,
        Tool.REQUEST_ADMISSION,
        arguments,
        lambda tx, op_digest: _admit(deps, tx, call, arguments, policy, op_digest, ahead),
        after_commit=destroy_candidate_key,
    )


def _embedded_ahead(deps: Deps, call: Call, candidate_id: str) -> Embedded | None:
    """The vector of a pending candidate as its record would get it, computed before the admission's
    transaction (the model holds no lock), so the record commits with it (Deps.embed_ahead). None when
    there is nothing to embed ahead: no model, a host import, or a candidate that is not waiting."""
    cache = deps.semantic
    if cache is None or deps.indexer is None or not deps.embed_ahead:
        return None
    try:
        with deps.store.read() as tx:
            candidate = tx.get_candidate(call.scope, candidate_id)
            if candidate is None or candidate.state != CandidateState.PENDING.value or candidate.adjudication:
                return None
            payload = read_payload(deps, tx, call.scope, candidate_id, "candidate")
    except ContractError:
        return None  # the admission itself reports what is wrong with the store or the body
    try:
        return embed_record(cache, call.scope, candidate_id, payload)
    except Exception:  # the model failed on this text: the indexer tries again after the admission
        logger.exception("embedding a candidate ahead of its admission failed")
        return None


def _admit(
    deps: Deps,
    tx: StoreTx,
    call: Call,
    arguments: AdmissionArguments,
    policy: AdmissionPolicy,
    op_digest: str,
    ahead: Embedded | None,
) -> dict[str, Any] | GateHeld:
    scope, key, candidate_id = call.scope, arguments.idempotency_key, arguments.candidate_id
    prior = replayed_response(tx.get_idempotency(scope, call.binding.principal, key), Tool.REQUEST_ADMISSION, op_digest)
    if prior is not None:
        return {"outcome": prior["outcome"], "replayed": True}
    candidate = tx.get_candidate(scope, candidate_id)
    if candidate is None:
        raise ContractError(ErrorCode.NOT_FOUND)
    candidate_transition(Operation.ACCEPT, CandidateState(candidate.state))
    gate_pass = None
    if call.binding.confirm_mutations:
        summary = {"operation": "request_admission", "candidate_id": candidate_id}
        request = GateRequest(scope, call.actor, Tool.REQUEST_ADMISSION.value, candidate_id, op_digest, None, summary)
        checked = check_gate(tx, request, call.now_ms)
        if isinstance(checked, GateHeld):
            return checked
        gate_pass = checked

    plaintext: bytes | None = None
    payload: Mapping[str, Any] | None = None
    if candidate.adjudication:
        decision = Decision(Verdict.ADJUDICATE, ("awaiting_review",), policy.policy_id, policy.version, policy.digest)
    else:
        decision, plaintext, payload = _policy_decision(deps, tx, call, candidate, policy)
    decision_digest = decision_receipt_digest(candidate_id, decision, call.now_ms)
    events, record_id = _apply(deps, tx, call, candidate, decision, decision_digest, plaintext, payload, ahead)

    still_in_force(deps, policy, decided_at_ms=call.now_ms, max_age_ms=DECISION_MAX_AGE_MS)
    if gate_pass is not None:
        consume(tx, gate_pass, deps.clock.now_ms())

    outcome = answer_outcome(
        candidate_id,
        decision,
        decision_digest,
        record_id=record_id,
        cursor=events[-1].cursor if events else head_of(tx, call).cursor,
        transaction_receipt=transaction_receipt_digest(Tool.REQUEST_ADMISSION.value, key, events),
    )
    remember_response(tx, call, Tool.REQUEST_ADMISSION, arguments, op_digest, candidate_id, {"outcome": outcome})
    return {"outcome": outcome, "replayed": False}


def _policy_decision(
    deps: Deps, tx: StoreTx, call: Call, candidate: CandidateRow, policy: AdmissionPolicy
) -> tuple[Decision, bytes | None, Mapping[str, Any] | None]:
    """The policy's decision on a candidate, with its body and payload when they had to be opened."""
    scope = candidate.scope
    facts = candidate_facts(candidate)
    duplicate = tx.find_record_by_digest(scope, candidate.payload_digest, RecordState.ACCEPTED_CURRENT.value)
    if duplicate is not None or rejection_reasons(policy, facts):
        return decide(policy, facts, duplicate_of=duplicate, tombstoned=False), None, None
    # Only a would-be acceptance needs the text: it is compared with the scope's current records, with
    # what the scope forgot, and its families with the scope's current records.
    plaintext = read_body(deps, tx, scope, candidate.candidate_id, "candidate")
    payload = json.loads(plaintext)["payload"]

    def payload_of(record_id: str) -> Mapping[str, Any]:
        return read_payload(deps, tx, scope, record_id, "record")

    same = same_text_record(tx, scope, payload, call.now_ms, payload_of)
    if same is not None:
        return decide(policy, facts, duplicate_of=same, tombstoned=False, same_text=True), plaintext, payload
    tombstoned = is_forgotten(deps, tx, candidate, payload)
    family = plan_families(deps.cursor_key, tx, scope, policy, payload) if family_refs(payload) else FamilyPlan()
    # A candidate already held for a person needs no further look (the rule may embed texts).
    near = not (tombstoned or family.weigh_against) and is_near_duplicate(
        tx,
        scope,
        policy,
        payload,
        call.now_ms,
        family.supersedes,
        semantic=deps.semantic,
        payload_of=payload_of,
    )
    decision = decide(
        policy,
        facts,
        duplicate_of=None,
        tombstoned=tombstoned,
        supersedes=family.supersedes,
        weigh_against=family.weigh_against,
        near_duplicate=near,
    )
    return decision, plaintext, payload


def still_in_force(deps: Deps, policy: AdmissionPolicy, *, decided_at_ms: int, max_age_ms: int | None = None) -> None:
    """A decision commits only under the policy it names, and (an agent's) only while it is fresh: raises
    ContractError POLICY_STALE otherwise. A person's decision has no age limit (`max_age_ms` None)."""
    stale = deps.policies.current().digest != policy.digest
    if max_age_ms is not None and deps.clock.now_ms() - decided_at_ms > max_age_ms:
        stale = True
    if stale:
        raise ContractError(ErrorCode.POLICY_STALE)


def candidate_facts(candidate: CandidateRow) -> CandidateFacts:
    """The policy's view of a candidate; who captured it is what the host's binding said then."""
    return CandidateFacts(
        size_bytes=candidate.size_bytes,
        citation_count=candidate.citation_count,
        has_attestation=candidate.has_attestation,
        secret_categories=candidate.secret_categories,
        principal=candidate.actor.principal,
        agent_id=candidate.actor.agent_id,
        trust_class=candidate.trust_class,
    )


def is_forgotten(deps: Deps, tx: TombstonesTx, candidate: CandidateRow, payload: Mapping[str, Any]) -> bool:
    """Whether the candidate's content is what its scope forgot (engine/lifecycle/tombstone_guard.py)."""
    if not tx.holds_tombstones(candidate.scope):
        return False
    fingerprints = candidate_fingerprints(guard_key(deps.cursor_key), candidate.payload_digest, payload)
    return tx.is_tombstoned(candidate.scope, fingerprints)


def _apply(
    deps: Deps,
    tx: StoreTx,
    call: Call,
    candidate: CandidateRow,
    decision: Decision,
    decision_digest: str,
    plaintext: bytes | None,
    payload: Mapping[str, Any] | None,
    ahead: Embedded | None,
) -> tuple[list[JournalEvent], str | None]:
    """Writes the decision's effects; returns the events appended and the record id, if any."""
    if candidate.adjudication:
        return [], None
    return apply_decision(
        deps,
        tx,
        candidate,
        decision,
        decision_digest,
        actor=call.actor_claims(),
        at_ms=call.now_ms,
        plaintext=plaintext,
        payload=payload,
        embedded=ahead,
    )
