"""Which records were true at a valid time, as the store knows it now or knew it then (a host read; issue 20).

Two times, as a bi-temporal store has them. Valid time T: a current record is true while its `valid_time`
holds (`t ≤ T ≤ t_end`, as search reads it); a record another one superseded is true from its own `t`
until its successor's `t` (exclusive), within its own `t_end`. So a read at a valid time before a
supersession's still sees the older record, and one after sees the newer. Known-at time S (optional):
the records' states are folded from their journaled transitions up to S, so a read "as the store knew it"
before a supersession was committed sees the older record as current, whatever the valid time. A record
made historical without a successor, expired, disputed or ended (at S, or now) is not read, and a
tombstoned record never is: forgotten content does not come back through history.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram_memory.contract.states import RecordState
from engram_memory.engine import journal
from engram_memory.engine.admission.families import family_key
from engram_memory.engine.deps import Deps
from engram_memory.engine.ports.agent_tx import RecordsTx
from engram_memory.engine.ports.maintenance import MaintenanceTx, RecordFilter
from engram_memory.engine.ports.store import RecordRow, Scope, StoreTx

_CURRENT = RecordState.ACCEPTED_CURRENT.value
_HISTORICAL = RecordState.HISTORICAL.value
_TOMBSTONED = RecordState.TOMBSTONED.value


@dataclass(frozen=True, slots=True)
class ValidRecord:
    """A record true at the asked valid time, with the end of its validity as now known (None: open)."""

    record: RecordRow
    valid_until_ms: int | None
    until_inclusive: bool


def _candidates(
    deps: Deps, tx: StoreTx, scope: Scope, family_ref: str | None, limit: int, *, every_state: bool
) -> list[RecordRow]:
    if family_ref is not None:
        key = family_key(deps.cursor_key, scope, family_ref)
        ids = tx.family_records(scope, [key])[key]
        rows = tx.get_records(scope, ids)
        found = [rows[record_id] for record_id in ids if record_id in rows]
    elif every_state:
        found = tx.list_records(RecordFilter(scope.tenant, scope.workspace, None, limit))
    else:
        found = []
        for state in (_CURRENT, _HISTORICAL):
            found += tx.list_records(RecordFilter(scope.tenant, scope.workspace, state, limit))
    return [row for row in found if row.state != _TOMBSTONED]


def _as_known_at(tx: MaintenanceTx, row: RecordRow, known_at_ms: int) -> tuple[str, str | None] | None:
    """The record's state and successor as its journaled transitions up to `known_at_ms` leave them; None
    when it was not admitted yet."""
    if row.admitted_at_ms > known_at_ms:
        return None
    state, successor = _CURRENT, None
    for event in tx.record_history(row.scope, row.record_id, [journal.RECORD_TRANSITIONED]):
        if event.at_ms > known_at_ms:
            break
        data = event.body["data"]
        state = str(data["to_state"])
        successor = data.get("superseded_by") if state == _HISTORICAL else None
    return state, None if successor is None else str(successor)


def _validity(tx: RecordsTx, row: RecordRow, state: str, successor_id: str | None) -> tuple[int | None, bool] | None:
    """(end, inclusive) of the row's validity, or None when it is not read as of any valid time."""
    if state == _CURRENT:
        return row.valid_to_ms, True
    if state != _HISTORICAL or successor_id is None:
        return None
    successor = tx.get_record(row.scope, successor_id)
    if successor is None:
        return None
    if row.valid_to_ms is not None and row.valid_to_ms < successor.valid_from_ms:
        return row.valid_to_ms, True
    return successor.valid_from_ms, False


def records_valid_at(
    deps: Deps,
    scope: Scope,
    valid_at_ms: int,
    *,
    family_ref: str | None = None,
    limit: int = 1000,
    known_at_ms: int | None = None,
) -> list[ValidRecord]:
    """The scope's records true at `valid_at_ms` (of one family, when named), as known now or, with
    `known_at_ms`, as known then; oldest first."""
    found: list[ValidRecord] = []
    with deps.store.read() as tx:
        for row in _candidates(deps, tx, scope, family_ref, limit, every_state=known_at_ms is not None):
            if known_at_ms is None:
                state, successor = row.state, row.superseded_by
            else:
                then = _as_known_at(tx, row, known_at_ms)
                if then is None:
                    continue
                state, successor = then
            validity = _validity(tx, row, state, successor)
            if validity is None or row.valid_from_ms > valid_at_ms:
                continue
            end, inclusive = validity
            if end is None or valid_at_ms < end or (inclusive and valid_at_ms == end):
                found.append(ValidRecord(row, end, inclusive))
    found.sort(key=lambda item: (item.record.valid_from_ms, item.record.record_id))
    return found[:limit]
