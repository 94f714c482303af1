"""Host lifecycle maintenance: the host's transitions of records, and automatic expiry.

One write transaction per operation; the transition table is asked before anything is written, so a
refusal leaves no trace. Every state change is one journal event in the record's own scope, signed by
the host, so folding the journal still gives the tables and page cursors go stale.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.instants import format_instant
from engram_memory.contract.states import RECORD_TRANSITIONS, Operation, RecordState, record_transition
from engram_memory.engine import journal
from engram_memory.engine.deps import Deps
from engram_memory.engine.lifecycle.erasure import coverage_of, destroy_record_key, erase_record
from engram_memory.engine.lifecycle.transitions import TransitionTx, record_transitioned
from engram_memory.engine.mutation import host_actor, reason_ref_ok
from engram_memory.engine.ports.maintenance import RecordFilter
from engram_memory.engine.ports.store import JournalEvent, RecordRow, StoreTx
from engram_memory.engine.projection import add_index_entry
from engram_memory.engine.recall.semantic import index_vector
from engram_memory.engine.refusals import Refusal, Refused
from engram_memory.engine.sealing.bodies import read_payload

AUTO_EXPIRY_ACTOR = "host:auto-expiry"
EXPIRY_BATCH = 100
_CURRENT = RecordState.ACCEPTED_CURRENT
_EXPIRABLE = tuple(sorted(state.value for state in RECORD_TRANSITIONS[Operation.EXPIRE][0]))


class MaintenanceRefused(Refused):
    """A host-side refusal of a record operation (engine/refusals.py); nothing was written."""


@dataclass(frozen=True, slots=True)
class _Other:
    """The other record of a supersede (its successor) or a rewind (the record it swaps out)."""

    is_self: Refusal
    elsewhere: Refusal
    missing: Refusal
    not_current: Refusal


_SUCCESSOR = _Other(
    Refusal.SUCCESSOR_IS_SELF, Refusal.SUCCESSOR_ELSEWHERE, Refusal.SUCCESSOR_MISSING, Refusal.SUCCESSOR_NOT_CURRENT
)
_REPLACED = _Other(
    Refusal.REPLACED_IS_SELF, Refusal.REPLACED_ELSEWHERE, Refusal.REPLACED_MISSING, Refusal.REPLACED_NOT_CURRENT
)


@dataclass(frozen=True, slots=True)
class Transition:
    """One state change as it was journaled; `record` is the row as it was before the change."""

    record: RecordRow
    operation: str
    from_state: str
    to_state: str
    event: JournalEvent


@dataclass(frozen=True, slots=True)
class MaintenanceOutcome:
    """Every transition one operation made: the asked-for record's first, then any record it displaced.

    `erasure` is set by tombstone only: the surfaces purged, the coverage receipt, physical erasure.
    """

    transitions: tuple[Transition, ...]
    erasure: Mapping[str, Any] | None = None

    @property
    def primary(self) -> Transition:
        return self.transitions[0]


@dataclass(frozen=True, slots=True)
class RecordDetails:
    """What `records show` tells the host: the row, its journaled history, and what it superseded."""

    record: RecordRow
    history: tuple[JournalEvent, ...]
    supersedes: tuple[str, ...]


# -- the eight host operations ------------------------------------------------------------------


def dispute(deps: Deps, record_id: str, *, decided_by: str, reason_ref: str | None = None) -> MaintenanceOutcome:
    """accepted_current -> accepted_disputed: out of search until the host resolves it."""
    return _simple(deps, record_id, Operation.DISPUTE, None, decided_by, reason_ref)


def resolve(
    deps: Deps, record_id: str, *, to_state: RecordState, decided_by: str, reason_ref: str | None = None
) -> MaintenanceOutcome:
    """accepted_disputed -> accepted_current (searchable again) or historical."""
    return _simple(deps, record_id, Operation.RESOLVE_DISPUTE, to_state, decided_by, reason_ref)


def mark_non_current(
    deps: Deps, record_id: str, *, decided_by: str, reason_ref: str | None = None
) -> MaintenanceOutcome:
    return _simple(deps, record_id, Operation.MARK_NON_CURRENT, None, decided_by, reason_ref)


def expire(deps: Deps, record_id: str, *, decided_by: str, reason_ref: str | None = None) -> MaintenanceOutcome:
    return _simple(deps, record_id, Operation.EXPIRE, None, decided_by, reason_ref)


def trust_invalidate(
    deps: Deps, record_id: str, *, decided_by: str, reason_ref: str | None = None
) -> MaintenanceOutcome:
    return _simple(deps, record_id, Operation.TRUST_INVALIDATE, None, decided_by, reason_ref)


def supersede(
    deps: Deps, record_id: str, *, successor_id: str, decided_by: str, reason_ref: str | None = None
) -> MaintenanceOutcome:
    """accepted_current | accepted_disputed -> historical, naming the current record that replaces it.

    The link is kept so a later rewind can swap the two back in one transaction.
    """

    def body(tx: StoreTx, record: RecordRow, act: _Act) -> list[Transition]:
        to_state = _legal(Operation.SUPERSEDE, record)
        _current_of_same_scope(tx, record, successor_id, _SUCCESSOR)
        moved = _move(deps, tx, record, Operation.SUPERSEDE, to_state, act, {"superseded_by": successor_id})
        tx.set_superseded_by(record.scope, record.record_id, successor_id)
        return [moved]

    return _run(deps, record_id, _Act(decided_by, reason_ref), body)


def rewind(
    deps: Deps, record_id: str, *, replacing: str | None = None, decided_by: str, reason_ref: str | None = None
) -> MaintenanceOutcome:
    """historical -> accepted_current, swapping atomically with the current record that displaced it.

    The displaced record is `replacing` when given (it must be current in the same scope), else the
    record's successor if that is still current; it becomes historical, superseded by this one.
    """

    def body(tx: StoreTx, record: RecordRow, act: _Act) -> list[Transition]:
        to_state = _legal(Operation.REWIND, record)
        displaced: RecordRow | None = None
        if replacing is not None:
            displaced = _current_of_same_scope(tx, record, replacing, _REPLACED)
        elif record.superseded_by is not None:
            successor = tx.get_record(record.scope, record.superseded_by)
            if successor is not None and successor.state == _CURRENT.value:
                displaced = successor
        # The displaced record steps aside first, then this one comes back: one transaction, two events.
        moves: list[Transition] = []
        if displaced is not None:
            displaced_to = _legal(Operation.SUPERSEDE, displaced)
            link = {"superseded_by": record.record_id}
            moves.append(_move(deps, tx, displaced, Operation.SUPERSEDE, displaced_to, act, link))
            tx.set_superseded_by(record.scope, displaced.record_id, record.record_id)
        extra = {} if displaced is None else {"replacing": displaced.record_id}
        rewound = _move(deps, tx, record, Operation.REWIND, to_state, act, extra)
        tx.set_superseded_by(record.scope, record.record_id, None)
        return [rewound, *moves]

    return _run(deps, record_id, _Act(decided_by, reason_ref), body)


def tombstone(deps: Deps, record_id: str, *, decided_by: str, reason_ref: str | None = None) -> MaintenanceOutcome:
    """Any live state -> tombstoned, with exactly forget's effects but no confirmation gate: the host is
    the human. After the commit the data key is destroyed and the erased bytes leave every file."""
    erased: dict[str, str] = {}

    def body(tx: StoreTx, record: RecordRow, act: _Act) -> list[Transition]:
        to_state = _legal(Operation.TOMBSTONE, record)
        erased.update(erase_record(deps, tx, record, act.at_ms))
        return [_journal(tx, record, Operation.TOMBSTONE, to_state, act, {})]

    outcome = _run(deps, record_id, _Act(decided_by, reason_ref), body)
    coverage = coverage_of(outcome.primary.record.record_id, outcome.primary.event.cursor, erased)
    receipt = destroy_record_key(deps, outcome.primary.record.scope, coverage)
    physically_erased = deps.store.erase_physically(now=True)  # a human waits for it: no compaction delay
    erasure = {
        "surfaces": coverage["surfaces"],
        "coverage_receipt_digest": receipt,
        "physical_erasure": "complete" if physically_erased else "pending",
    }
    return MaintenanceOutcome(outcome.transitions, erasure)


# -- automatic expiry ---------------------------------------------------------------------------


def expire_due(deps: Deps, now_ms: int, limit: int = 1000, *, batch_size: int = EXPIRY_BATCH) -> list[Transition]:
    """Expires up to `limit` records whose retention `expires_at` is at or before `now_ms`.

    Batches of `batch_size`, each its own write transaction, so agent calls interleave with a long
    sweep. Journaled as AUTO_EXPIRY_ACTOR. Returns what it expired, soonest expiry first.
    """
    act = _Act(AUTO_EXPIRY_ACTOR, None, at_ms=now_ms)
    expired: list[Transition] = []
    while len(expired) < limit:
        wanted = min(batch_size, limit - len(expired))
        with deps.store.write() as tx:
            due = tx.records_due_for_expiry(now_ms, _EXPIRABLE, wanted)
            for record in due:
                to_state = _legal(Operation.EXPIRE, record)
                extra = {"expires_at": format_instant(record.expires_at_ms or now_ms)}
                expired.append(_move(deps, tx, record, Operation.EXPIRE, to_state, act, extra))
        if len(due) < wanted:
            break
    return expired


# -- host reads ---------------------------------------------------------------------------------


def list_records(deps: Deps, filters: RecordFilter) -> list[RecordRow]:
    with deps.store.read() as tx:
        return tx.list_records(filters)


def show_record(deps: Deps, record_id: str) -> RecordDetails:
    """Raises MaintenanceRefused for an unknown id. Never decrypts: the host's review path does that."""
    with deps.store.read() as tx:
        record = tx.find_record(record_id)
        if record is None:
            raise MaintenanceRefused(Refusal.NO_SUCH_RECORD, record_id=record_id)
        history = tx.record_history(record.scope, record_id, sorted(journal.RECORD_EVENTS))
        supersedes = tx.records_superseded_by(record.scope, record_id)
    return RecordDetails(record, tuple(history), tuple(supersedes))


# -- the machinery ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Act:
    """Who acts, why, and when: one instant for every event of one operation."""

    decided_by: str
    reason_ref: str | None
    at_ms: int = 0

    @property
    def actor(self) -> dict[str, str]:
        return host_actor(self.decided_by)


_Body = Callable[[StoreTx, RecordRow, _Act], list[Transition]]


def _run(deps: Deps, record_id: str, act: _Act, body: _Body) -> MaintenanceOutcome:
    """Raises MaintenanceRefused (nothing written); ContractError BLOB_MISSING, STORE_UNAVAILABLE,
    MUTATION_OUTCOME_UNKNOWN from the store."""
    _check_reason_ref(act.reason_ref)
    timed = _Act(act.decided_by, act.reason_ref, deps.clock.now_ms())
    with deps.store.write() as tx:
        record = tx.find_record(record_id)
        if record is None:
            raise MaintenanceRefused(Refusal.NO_SUCH_RECORD, record_id=record_id)
        return MaintenanceOutcome(tuple(body(tx, record, timed)))


def _simple(
    deps: Deps,
    record_id: str,
    operation: Operation,
    target: RecordState | None,
    decided_by: str,
    reason_ref: str | None,
) -> MaintenanceOutcome:
    def body(tx: StoreTx, record: RecordRow, act: _Act) -> list[Transition]:
        return [_move(deps, tx, record, operation, _legal(operation, record, target), act, {})]

    return _run(deps, record_id, _Act(decided_by, reason_ref), body)


def _check_reason_ref(reason_ref: str | None) -> None:
    """The same opaque-ref rule agents follow: NFC, 1-512 UTF-8 bytes."""
    if not reason_ref_ok(reason_ref):
        raise MaintenanceRefused(Refusal.REASON_REF_INVALID)


def _legal(operation: Operation, record: RecordRow, target: RecordState | None = None) -> RecordState:
    """The transition table's answer, as a one-line refusal naming the code when it says no."""
    try:
        return record_transition(operation, RecordState(record.state), target)
    except ContractError as refusal:
        if refusal.code is ErrorCode.ALREADY_TERMINAL:
            raise MaintenanceRefused(Refusal.RECORD_TERMINAL, record_id=record.record_id, state=record.state) from None
        allowed = " | ".join(sorted(state.value for state in RECORD_TRANSITIONS[operation][0]))
        raise MaintenanceRefused(
            Refusal.RECORD_NOT_ALLOWED,
            operation=operation.value,
            allowed=allowed,
            record_id=record.record_id,
            state=record.state,
        ) from None


def _current_of_same_scope(tx: StoreTx, record: RecordRow, other_id: str, other: _Other) -> RecordRow:
    """The other record of a supersede or rewind: accepted_current, same scope, not the record itself."""
    if other_id == record.record_id:
        raise MaintenanceRefused(other.is_self, record_id=record.record_id)
    found = tx.get_record(record.scope, other_id)
    if found is None:
        where = other.elsewhere if tx.find_record(other_id) is not None else other.missing
        raise MaintenanceRefused(where, other_id=other_id, tenant=record.scope.tenant, workspace=record.scope.workspace)
    if found.state != _CURRENT.value:
        raise MaintenanceRefused(other.not_current, other_id=other_id, state=found.state)
    return found


def _move(
    deps: Deps,
    tx: StoreTx,
    record: RecordRow,
    operation: Operation,
    to_state: RecordState,
    act: _Act,
    extra: Mapping[str, Any],
) -> Transition:
    """The index follows the state: exactly the accepted_current records are searchable."""
    was_current = record.state == _CURRENT.value
    if was_current and to_state is not _CURRENT:
        tx.unindex_record(record.scope, record.record_id)
    payload = _reindex(deps, tx, record) if to_state is _CURRENT and not was_current else None
    moved = _journal(tx, record, operation, to_state, act, extra)
    if payload is not None:  # a vector is only kept for a record that is accepted_current
        index_vector(deps.semantic, tx, record.scope, record.record_id, payload)
    return moved


def _reindex(deps: Deps, tx: StoreTx, record: RecordRow) -> Mapping[str, Any]:
    """Raises ContractError BLOB_MISSING when the body or its data key is gone: never an empty entry."""
    payload = read_payload(deps, tx, record.scope, record.record_id, "record")
    add_index_entry(tx, record.scope, record.record_id, payload)
    return payload


def _journal(
    tx: TransitionTx,
    record: RecordRow,
    operation: Operation,
    to_state: RecordState,
    act: _Act,
    extra: Mapping[str, Any],
) -> Transition:
    event = record_transitioned(
        tx, record, operation, to_state, actor=act.actor, at_ms=act.at_ms, reason_ref=act.reason_ref, extra=extra
    )
    return Transition(record, operation.value, record.state, to_state.value, event)
