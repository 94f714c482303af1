"""SQL for the host's maintenance path, mixed into the one transaction class (see queries.py).

The host names records by id and lists them store-wide, so some statements here span scopes on
purpose; each says so. Nothing here is reachable from an agent call.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from engram_memory.engine.ports_maintenance import RecordFilter
from engram_memory.engine.rows import JournalEvent, RecordRow, Scope


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" for _ in values)


class MaintenanceQueries:
    """Host-path statements; each names its scope, or says why it spans scopes."""

    _db: sqlite3.Connection
    # Provided by SQLiteTx, which owns the records table's column list and row mapping.
    _RECORD_COLUMNS: ClassVar[str]
    _record: Callable[[Sequence[Any]], RecordRow]

    def find_record(self, record_id: str) -> RecordRow | None:
        # Spans scopes: the host names a record by its store-wide unique id and may see every scope.
        row = self._db.execute(
            f"SELECT {self._RECORD_COLUMNS} FROM records WHERE record_id = ?",  # noqa: S608
            (record_id,),
        ).fetchone()
        return None if row is None else self._record(row)

    def set_superseded_by(self, scope: Scope, record_id: str, successor_id: str | None) -> None:
        self._db.execute(
            "UPDATE records SET superseded_by = ? WHERE record_id = ? AND tenant = ? AND workspace = ?",
            (successor_id, record_id, scope.tenant, scope.workspace),
        )

    def records_superseded_by(self, scope: Scope, successor_id: str) -> list[str]:
        rows = self._db.execute(
            "SELECT record_id FROM records WHERE tenant = ? AND workspace = ? AND superseded_by = ? ORDER BY rid",
            (scope.tenant, scope.workspace, successor_id),
        ).fetchall()
        return [str(row[0]) for row in rows]

    def records_due_for_expiry(self, now_ms: int, states: Sequence[str], limit: int) -> list[RecordRow]:
        # Spans scopes: automatic expiry is one host sweep over the whole store (index records_by_expiry).
        rows = self._db.execute(
            f"SELECT {self._RECORD_COLUMNS} FROM records"  # noqa: S608
            f" WHERE expires_at_ms IS NOT NULL AND expires_at_ms <= ? AND state IN ({_marks(states)})"
            " ORDER BY expires_at_ms, rid LIMIT ?",
            (now_ms, *states, limit),
        ).fetchall()
        return [self._record(row) for row in rows]

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
            f"SELECT {self._RECORD_COLUMNS} FROM records{where} ORDER BY tenant, workspace, rid LIMIT ?",  # noqa: S608
            (*params, filters.limit),
        ).fetchall()
        return [self._record(row) for row in rows]

    def record_history(self, scope: Scope, record_id: str, kinds: Sequence[str]) -> list[JournalEvent]:
        rows = self._db.execute(
            "SELECT cursor, event_id, kind, at_ms, body, prev_digest, event_digest, affects_records FROM journal"  # noqa: S608
            f" WHERE tenant = ? AND workspace = ? AND kind IN ({_marks(kinds)})"
            " AND json_extract(body, '$.data.record_id') = ? ORDER BY cursor",
            (scope.tenant, scope.workspace, *kinds, record_id),
        ).fetchall()
        return [
            JournalEvent(
                scope=scope,
                cursor=row[0],
                event_id=row[1],
                kind=row[2],
                at_ms=row[3],
                body=json.loads(row[4]),
                prev_digest=row[5],
                event_digest=row[6],
                affects_records=bool(row[7]),
            )
            for row in rows
        ]
