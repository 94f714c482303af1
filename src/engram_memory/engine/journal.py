"""The append-only, hash-chained journal of one scope: building events, checking the chain, folding it.

Each event's digest covers its predecessor's, and cursors are dense per scope, so a changed, dropped
or reordered event is detectable. Events carry ids, states and digests, never memory text: the
journal can be kept forever while forgotten content is erased.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engram_memory.contract.canonical import (
    JOURNAL_DOMAIN,
    JOURNAL_GENESIS_DOMAIN,
    canonical_json,
    digest,
    digest_bytes,
)
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.ids import new_event_id
from engram_memory.contract.states import CandidateState, RecordState
from engram_memory.engine.ports.store import JournalEvent, Scope, ScopeHead

CANDIDATE_CAPTURED = "candidate.captured"
CANDIDATE_ACCEPTED = "candidate.accepted"
CANDIDATE_DUPLICATE = "candidate.duplicate"
CANDIDATE_REJECTED = "candidate.rejected"
CANDIDATE_ADJUDICATION = "candidate.adjudication_requested"
CANDIDATE_WITHDRAWN = "candidate.withdrawn"
RECORD_TRANSITIONED = "record.transitioned"

RECORD_EVENTS = frozenset({CANDIDATE_ACCEPTED, RECORD_TRANSITIONED})


def genesis_digest(scope: Scope) -> str:
    return digest(JOURNAL_GENESIS_DOMAIN, {"tenant": scope.tenant, "workspace": scope.workspace})


def initial_head(scope: Scope) -> ScopeHead:
    return ScopeHead(cursor=0, digest=genesis_digest(scope), records_cursor=0)


def event_digest(body: Mapping[str, Any]) -> str:
    return digest(JOURNAL_DOMAIN, dict(body))


def next_event(
    scope: Scope,
    head: ScopeHead,
    *,
    kind: str,
    at_ms: int,
    actor: Mapping[str, str],
    data: Mapping[str, Any],
) -> JournalEvent:
    """The event that extends `head` by one; the store's keys refuse a second event at that cursor."""
    cursor = head.cursor + 1
    event_id = new_event_id()
    body = {
        "v": 1,
        "tenant": scope.tenant,
        "workspace": scope.workspace,
        "cursor": cursor,
        "prev": head.digest,
        "event_id": event_id,
        "kind": kind,
        "at": at_ms,
        "actor": dict(actor),
        "data": dict(data),
    }
    body_json = canonical_json(body)
    return event_of(scope, body, event_digest=digest_bytes(JOURNAL_DOMAIN, body_json), body_json=body_json)


def event_of(
    scope: Scope, body: Mapping[str, Any], *, event_digest: str, body_json: bytes | None = None
) -> JournalEvent:
    """The event a body describes: its columns are read from the body, so the two cannot disagree
    (the verifier checks a stored row's columns against its body before it comes here)."""
    kind = body["kind"]
    return JournalEvent(
        scope=scope,
        cursor=body["cursor"],
        event_id=body["event_id"],
        kind=kind,
        at_ms=body["at"],
        body=body,
        prev_digest=body["prev"],
        event_digest=event_digest,
        affects_records=kind in RECORD_EVENTS,
        body_json=body_json,
    )


def verify_chain(scope: Scope, events: Iterable[JournalEvent]) -> ScopeHead:
    """The head the events lead to. Raises ContractError CURSOR_GAP or JOURNAL_CORRUPT."""
    head = initial_head(scope)
    for event in events:
        if event.cursor != head.cursor + 1 or event.body.get("cursor") != event.cursor:
            raise ContractError(ErrorCode.CURSOR_GAP)
        if event.prev_digest != head.digest or event.body.get("prev") != head.digest:
            raise ContractError(ErrorCode.JOURNAL_CORRUPT)
        if event_digest(event.body) != event.event_digest:
            raise ContractError(ErrorCode.JOURNAL_CORRUPT)
        records_cursor = event.cursor if event.affects_records else head.records_cursor
        head = ScopeHead(cursor=event.cursor, digest=event.event_digest, records_cursor=records_cursor)
    return head


@dataclass
class FoldedState:
    """What replaying a scope's journal says every candidate and record is."""

    candidates: dict[str, str] = field(default_factory=dict)
    records: dict[str, str] = field(default_factory=dict)
    adjudication: set[str] = field(default_factory=set)


def fold(events: Iterable[JournalEvent]) -> FoldedState:
    state = FoldedState()
    for event in events:
        apply_event(state, event)
    return state


def apply_event(state: FoldedState, event: JournalEvent) -> None:
    """One event's effect on the folded state, so a long journal can be folded as it streams by.
    Raises ContractError JOURNAL_CORRUPT for an unknown kind (KeyError, TypeError for malformed data)."""
    data = event.body["data"]
    kind = event.kind
    if kind == CANDIDATE_CAPTURED:
        state.candidates[data["candidate_id"]] = CandidateState.PENDING.value
    elif kind in (CANDIDATE_ACCEPTED, CANDIDATE_DUPLICATE):
        state.candidates[data["candidate_id"]] = CandidateState.ACCEPTED_CURRENT.value
        state.adjudication.discard(data["candidate_id"])
        if kind == CANDIDATE_ACCEPTED:
            state.records[data["record_id"]] = RecordState.ACCEPTED_CURRENT.value
    elif kind == CANDIDATE_REJECTED:
        state.candidates[data["candidate_id"]] = CandidateState.REJECTED.value
        state.adjudication.discard(data["candidate_id"])
    elif kind == CANDIDATE_ADJUDICATION:
        state.adjudication.add(data["candidate_id"])
    elif kind == CANDIDATE_WITHDRAWN:
        state.candidates[data["candidate_id"]] = CandidateState.WITHDRAWN.value
        state.adjudication.discard(data["candidate_id"])
    elif kind == RECORD_TRANSITIONED:
        state.records[data["record_id"]] = data["to_state"]
    else:
        raise ContractError(ErrorCode.JOURNAL_CORRUPT)
