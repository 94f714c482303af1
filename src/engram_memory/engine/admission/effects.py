"""What an admission decision writes, whoever made it: the agent's policy or a human in the review queue.

One journal event in the candidate's scope, the record (re-sealed under its own data key, indexed) when
accepted, the candidate's body ended when it is not needed, and the candidate row moved. The agent's
`request_admission` and the host's `review accept|reject` both call `apply_decision`, so the two paths
cannot drift apart in what an accepted memory looks like.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from engram_memory.contract.ids import new_record_id
from engram_memory.contract.instants import parse_instant
from engram_memory.contract.states import CandidateState, RecordState
from engram_memory.engine import journal
from engram_memory.engine.admission.decision import EXPLAINED, Decision, Verdict, shown_reasons
from engram_memory.engine.admission.families import family_keys, supersede_members
from engram_memory.engine.deps import Deps
from engram_memory.engine.mutation import append_event_as
from engram_memory.engine.ports.store import CandidateRow, JournalEvent, RecordRow, StoreTx
from engram_memory.engine.projection import add_index_entry
from engram_memory.engine.recall.semantic import Embedded, index_vector, to_bytes
from engram_memory.engine.sealing.bodies import read_body
from engram_memory.engine.sealing.seal import seal


@dataclass(frozen=True, slots=True)
class Effect:
    """What a verdict writes and answers: its journal event, the candidate's next state, whether the
    candidate now waits for a person, and the status an agent's answer names."""

    event_kind: str
    candidate_state: CandidateState
    waits_for_person: bool
    status: str


EFFECTS: Mapping[Verdict, Effect] = MappingProxyType(
    {
        Verdict.ACCEPT: Effect(journal.CANDIDATE_ACCEPTED, CandidateState.ACCEPTED_CURRENT, False, "accepted"),
        Verdict.DUPLICATE: Effect(
            journal.CANDIDATE_DUPLICATE, CandidateState.ACCEPTED_CURRENT, False, "duplicate_exact"
        ),
        Verdict.REJECT: Effect(journal.CANDIDATE_REJECTED, CandidateState.REJECTED, False, "rejected"),
        Verdict.ADJUDICATE: Effect(
            journal.CANDIDATE_ADJUDICATION, CandidateState.PENDING, True, "pending_adjudication"
        ),
    }
)


def answer_outcome(
    candidate_id: str,
    decision: Decision,
    decision_digest: str,
    *,
    record_id: str | None,
    cursor: int,
    transaction_receipt: str,
) -> dict[str, Any]:
    """The `outcome` of an agent's request_admission answer: what the policy answers at once, and what a
    person's later decision replays into every answer that was left pending."""
    outcome: dict[str, Any] = {"status": EFFECTS[decision.verdict].status, "candidate_id": candidate_id}
    if record_id is not None:
        outcome["record_id"] = record_id
    if decision.verdict in EXPLAINED:
        outcome["reasons"] = shown_reasons(decision.reasons)
    if decision.supersedes:
        outcome["superseded_record_ids"] = list(decision.supersedes)
    outcome["cursor"] = cursor
    outcome["decision_receipt_digest"] = decision_digest
    outcome["transaction_receipt_digest"] = transaction_receipt
    return outcome


def apply_decision(
    deps: Deps,
    tx: StoreTx,
    candidate: CandidateRow,
    decision: Decision,
    decision_digest: str,
    *,
    actor: Mapping[str, str],
    at_ms: int,
    plaintext: bytes | None = None,
    reason_ref: str | None = None,
    payload: Mapping[str, Any] | None = None,
    embedded: Embedded | None = None,
) -> tuple[list[JournalEvent], str | None]:
    """Journals the decision and writes its effects; returns the events (the decision's first, then one
    per record an acceptance superseded) and the record id, if any.

    `plaintext` is the candidate's body when the caller opened it already, `payload` its parsed payload,
    `embedded` its vector when the caller computed it already. Raises ContractError BLOB_MISSING.
    """
    scope, candidate_id = candidate.scope, candidate.candidate_id
    effect = EFFECTS[decision.verdict]
    adjudication = effect.waits_for_person
    record_id = new_record_id() if decision.verdict is Verdict.ACCEPT else decision.duplicate_of
    data: dict[str, Any] = {
        "candidate_id": candidate_id,
        "payload_digest": candidate.payload_digest,
        "decision_receipt_digest": decision_digest,
        "policy_id": decision.policy_id,
        "policy_version": decision.policy_version,
        "reasons": list(decision.reasons),
    }
    if record_id is not None:
        data["record_id"] = record_id
    if reason_ref is not None:
        data["reason_ref"] = reason_ref
    if decision.supersedes:
        data["supersedes"] = list(decision.supersedes)
    event = append_event_as(tx, scope, actor, at_ms, effect.event_kind, data)
    events = [event]
    if decision.verdict is Verdict.ACCEPT and record_id is not None:
        create_record(
            deps, tx, candidate, record_id, event.cursor, at_ms, plaintext=plaintext, payload=payload, embedded=embedded
        )
        events += supersede_members(
            tx,
            scope,
            decision.supersedes,
            record_id,
            actor=actor,
            at_ms=at_ms,
            decision_receipt_digest=decision_digest,
        )
    elif decision.verdict in (Verdict.DUPLICATE, Verdict.REJECT):
        tx.discard_body(scope, candidate_id)
    tx.update_candidate(
        scope,
        candidate_id,
        state=effect.candidate_state.value,
        adjudication=adjudication,
        record_id=record_id,
        review_reasons=decision.reasons if adjudication or decision.verdict is Verdict.REJECT else (),
    )
    return events, record_id


def create_record(
    deps: Deps,
    tx: StoreTx,
    candidate: CandidateRow,
    record_id: str,
    cursor: int,
    at_ms: int,
    *,
    plaintext: bytes | None = None,
    payload: Mapping[str, Any] | None = None,
    embedded: Embedded | None = None,
) -> None:
    """The accepted candidate becomes a record: re-sealed under its own key, indexed, candidate body gone.

    Shared by the admission policy and the host's review queue; `plaintext` is the candidate's body when
    the caller opened it already, `payload` its parsed payload, `embedded` its vector when the caller
    computed it (then written with the record). Raises ContractError BLOB_MISSING.
    """
    scope = candidate.scope
    if plaintext is None:
        plaintext = read_body(deps, tx, scope, candidate.candidate_id, "candidate")
        payload = None
    if payload is None:
        payload = json.loads(plaintext)["payload"]
    expires_at = payload["retention"].get("expires_at")
    tx.insert_record(
        RecordRow(
            scope=scope,
            record_id=record_id,
            candidate_id=candidate.candidate_id,
            state=RecordState.ACCEPTED_CURRENT.value,
            payload_digest=candidate.payload_digest,
            valid_from_ms=payload["valid_time"]["t"],
            valid_to_ms=payload["valid_time"].get("t_end"),
            expires_at_ms=None if expires_at is None else parse_instant(expires_at),
            admitted_at_ms=at_ms,
            state_cursor=cursor,
            actor=candidate.actor,
            captured_at_ms=candidate.captured_at_ms,
            trust_class=candidate.trust_class,
        )
    )
    tx.put_body(scope, record_id, seal(deps.keyring, deps.vault, scope, record_id, "record", plaintext, at_ms))
    tx.discard_body(scope, candidate.candidate_id)
    families = family_keys(deps.cursor_key, scope, payload)
    if families:
        tx.add_record_families(scope, record_id, families)
    add_index_entry(tx, scope, record_id, payload)
    if embedded is not None:
        tx.put_vector(scope, record_id, embedded.vector_id, to_bytes(embedded.vector), embedded.subject)
    elif deps.indexer is not None:
        deps.indexer.schedule(scope, record_id, payload)
    else:
        index_vector(deps.semantic, tx, scope, record_id, payload)
