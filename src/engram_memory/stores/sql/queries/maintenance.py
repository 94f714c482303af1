"""Statements for the host's maintenance path, mixed into the one transaction class (see transaction.py).

The host names records by id and lists them store-wide, so some statements here span scopes on
purpose; each says so. Nothing here is reachable from an agent call.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram_memory.engine.ports.maintenance import RecordFilter
from engram_memory.engine.ports.rows import JournalEvent, RecordRow, Scope
from engram_memory.stores.sql.base import SqlBase
from engram_memory.stores.sql.rows import EVENT_COLUMNS, RECORD_COLUMNS, event_row, record_row


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values)


class MaintenanceQueries(SqlBase):
    """Host-path statements; each names its scope, or says why it spans scopes."""

    def find_record(self, record_id: str) -> RecordRow | None:
        # Spans scopes: the host names a record by its store-wide unique id and may see every scope.
        row = self._db.execute(
            f"SELECT {RECORD_COLUMNS} FROM records WHERE record_id = ?",  # noqa: S608
            (record_id,),
        ).fetchone()
        return None if row is None else record_row(row)

    def set_superseded_by(self, scope: Scope, record_id: str, successor_id: str | None) -> None:
        self._enter_tenant(scope.tenant)
        self._db.execute(
            "UPDATE records SET superseded_by = ? WHERE record_id = ? AND tenant = ? AND workspace = ?",
            (successor_id, record_id, scope.tenant, scope.workspace),
        )

    def records_superseded_by(self, scope: Scope, successor_id: str) -> list[str]:
        self._enter_tenant(scope.tenant)
        rows = self._db.execute(
            "SELECT record_id FROM records WHERE tenant = ? AND workspace = ? AND superseded_by = ? ORDER BY rid",
            (scope.tenant, scope.workspace, successor_id),
        ).fetchall()
        return [str(row[0]) for row in rows]

    def records_due_for_expiry(self, now_ms: int, states: Sequence[str], limit: int) -> list[RecordRow]:
        # Spans scopes: automatic expiry is one host sweep over the whole store (index records_by_expiry).
        rows = self._db.execute(
            f"SELECT {RECORD_COLUMNS} FROM records"  # noqa: S608
            f" WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= ? AND state IN ({_marks(states)})"
            " ORDER BY expires_at_ms, rid LIMIT ?",
            (now_ms, *states, limit),
        ).fetchall()
        return [record_row(row) for row in rows]

    def list_records(self, filters: RecordFilter) -> list[RecordRow]:
        # Spans scopes unless the filter names one: the host's listing covers the whole store.
        clauses: list[str] = []
        params: list[object] = []
        for column, value in (("tenant", filters.tenant), ("workspace", filters.workspace), ("state", filters.state)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._db.execute(
            f"SELECT {RECORD_COLUMNS} FROM records{where} ORDER BY tenant, workspace, rid LIMIT ?",  # noqa: S608
            (*params, filters.limit),
        ).fetchall()
        return [record_row(row) for row in rows]

    def record_history(self, scope: Scope, record_id: str, kinds: Sequence[str]) -> list[JournalEvent]:
        self._enter_tenant(scope.tenant)
        subject = self._json_text("body", "data", "record_id")
        rows = self._db.execute(
            f"SELECT {EVENT_COLUMNS} FROM journal"  # noqa: S608
            f" WHERE tenant = ? AND workspace = ? AND kind IN ({_marks(kinds)}) AND {subject} = ? ORDER BY cursor",
            (scope.tenant, scope.workspace, *kinds, record_id),
        ).fetchall()
        return [event_row(scope, row) for row in rows]
