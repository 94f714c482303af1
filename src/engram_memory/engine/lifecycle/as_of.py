"""Which records were true at a valid time, as the store knows it now (a host read; issue 20).

A current record is true while its `valid_time` holds (`t ≤ T ≤ t_end`, as search reads it). A record
another one superseded is true from its own `t` until its successor's `t` (exclusive), within its own
`t_end`: so an as-of read before a supersession's valid time still sees the older record, and one after
sees the newer. A record made historical without a successor, expired, disputed or ended is not read.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram_memory.contract.states import RecordState
from engram_memory.engine.admission.families import family_key
from engram_memory.engine.deps import Deps
from engram_memory.engine.ports.maintenance import RecordFilter
from engram_memory.engine.ports.store import RecordRow, Scope, StoreTx

_CURRENT = RecordState.ACCEPTED_CURRENT.value
_HISTORICAL = RecordState.HISTORICAL.value


@dataclass(frozen=True, slots=True)
class ValidRecord:
    """A record true at the asked valid time, with the end of its validity as now known (None: open)."""

    record: RecordRow
    valid_until_ms: int | None
    until_inclusive: bool


def _candidates(deps: Deps, tx: StoreTx, scope: Scope, family_ref: str | None, limit: int) -> list[RecordRow]:
    if family_ref is not None:
        key = family_key(deps.cursor_key, scope, family_ref)
        ids = tx.family_records(scope, [key])[key]
        rows = tx.get_records(scope, ids)
        return [rows[record_id] for record_id in ids if record_id in rows]
    found: list[RecordRow] = []
    for state in (_CURRENT, _HISTORICAL):
        found += tx.list_records(RecordFilter(scope.tenant, scope.workspace, state, limit))
    return found


def _validity(tx: StoreTx, row: RecordRow) -> tuple[int | None, bool] | None:
    """(end, inclusive) of the row's validity as now known, or None when it is not read as of any time."""
    if row.state == _CURRENT:
        return row.valid_to_ms, True
    if row.state != _HISTORICAL or row.superseded_by is None:
        return None
    successor = tx.get_record(row.scope, row.superseded_by)
    if successor is None:
        return None
    if row.valid_to_ms is not None and row.valid_to_ms < successor.valid_from_ms:
        return row.valid_to_ms, True
    return successor.valid_from_ms, False


def records_valid_at(
    deps: Deps, scope: Scope, valid_at_ms: int, *, family_ref: str | None = None, limit: int = 1000
) -> list[ValidRecord]:
    """The scope's records true at `valid_at_ms` (of one family, when named), oldest first."""
    found: list[ValidRecord] = []
    with deps.store.read() as tx:
        for row in _candidates(deps, tx, scope, family_ref, limit):
            validity = _validity(tx, row)
            if validity is None or row.valid_from_ms > valid_at_ms:
                continue
            end, inclusive = validity
            if end is None or valid_at_ms < end or (inclusive and valid_at_ms == end):
                found.append(ValidRecord(row, end, inclusive))
    found.sort(key=lambda item: (item.record.valid_from_ms, item.record.record_id))
    return found[:limit]
