"""The semantic index's statements, mixed into the one transaction class (see transaction.py): plain rows
in both stores, one vector per accepted_current record, dropped with its lexical entry."""

from __future__ import annotations

from collections.abc import Sequence

from engram_memory.engine.ports.store import RecordChange, Scope, StoredVector, UnembeddedRecord
from engram_memory.stores.sql.base import SqlBase


class VectorQueries(SqlBase):
    def put_vector(self, scope: Scope, record_id: str, model: str, vector: bytes, subject: str) -> bool:
        self._enter_tenant(scope.tenant)
        current = (record_id, scope.tenant, scope.workspace)
        # Another model's vector gives way; this model's first vector stays (both are the same floats).
        self._db.execute(
            "DELETE FROM record_vectors WHERE model <> ? AND tenant = ? AND rid = (SELECT rid FROM records"
            " WHERE record_id = ? AND tenant = ? AND workspace = ?)",
            (model, scope.tenant, *current),
        )
        cursor = self._db.execute(
            "INSERT INTO record_vectors (rid, tenant, workspace, model, vector, subject)"
            " SELECT rid, tenant, workspace, ?, ?, ? FROM records"
            " WHERE record_id = ? AND tenant = ? AND workspace = ? AND state = 'accepted_current'"
            " ON CONFLICT DO NOTHING",
            (model, vector, subject, *current),
        )
        return bool(cursor.rowcount)

    def records_without_vector(self, scope: Scope, models: Sequence[str]) -> list[UnembeddedRecord]:
        self._enter_tenant(scope.tenant)
        if not models:
            raise ValueError("records_without_vector needs at least one model")
        # A record has one vector (put_vector), so "by none of these" is "no row, or a row of another model".
        marks = ", ".join("?" for _ in models)
        rows = self._db.execute(
            "SELECT r.record_id, r.valid_from_ms, r.valid_to_ms, r.expires_at_ms FROM records AS r"  # noqa: S608
            f" LEFT JOIN record_vectors AS v ON v.tenant = r.tenant AND v.rid = r.rid AND v.model IN ({marks})"
            " WHERE r.tenant = ? AND r.workspace = ? AND r.state = 'accepted_current' AND v.rid IS NULL"
            " ORDER BY r.rid",
            (*models, scope.tenant, scope.workspace),
        ).fetchall()
        return [UnembeddedRecord(row[0], row[1], row[2], row[3]) for row in rows]

    def vectors(self, scope: Scope, model: str) -> list[StoredVector]:
        self._enter_tenant(scope.tenant)
        rows = self._db.execute(
            "SELECT r.record_id, v.vector, v.subject, r.valid_from_ms, r.valid_to_ms, r.expires_at_ms"
            " FROM record_vectors AS v JOIN records AS r ON r.tenant = v.tenant AND r.rid = v.rid"
            " WHERE v.tenant = ? AND v.workspace = ? AND v.model = ? AND r.state = 'accepted_current'"
            " ORDER BY v.rid",
            (scope.tenant, scope.workspace, model),
        ).fetchall()
        return [StoredVector(row[0], bytes(row[1]), row[2], row[3], row[4], row[5]) for row in rows]

    def vectors_of(self, scope: Scope, model: str, record_ids: Sequence[str]) -> dict[str, bytes]:
        if not record_ids:
            return {}
        self._enter_tenant(scope.tenant)
        marks = ", ".join("?" * len(record_ids))
        rows = self._db.execute(
            "SELECT r.record_id, v.vector FROM record_vectors AS v"  # noqa: S608 (placeholders only)
            " JOIN records AS r ON r.tenant = v.tenant AND r.rid = v.rid"
            " WHERE v.tenant = ? AND v.workspace = ? AND v.model = ? AND r.state = 'accepted_current'"
            f" AND r.record_id IN ({marks})",
            (scope.tenant, scope.workspace, model, *record_ids),
        ).fetchall()
        return {str(row[0]): bytes(row[1]) for row in rows}

    def record_changes(self, scope: Scope, after: int, through: int, model: str) -> list[RecordChange]:
        self._enter_tenant(scope.tenant)
        rows = self._db.execute(
            "SELECT r.record_id, r.state, r.state_cursor, r.valid_from_ms, r.valid_to_ms, r.expires_at_ms,"
            " v.vector, v.subject FROM records AS r"
            " LEFT JOIN record_vectors AS v ON v.tenant = r.tenant AND v.rid = r.rid AND v.model = ?"
            " AND r.state = 'accepted_current'"
            " WHERE r.tenant = ? AND r.workspace = ? AND r.state_cursor > ? AND r.state_cursor <= ?"
            " ORDER BY r.state_cursor, r.rid",
            (model, scope.tenant, scope.workspace, after, through),
        ).fetchall()
        return [
            RecordChange(
                str(row[0]),
                str(row[1]),
                int(row[2]),
                int(row[3]),
                row[4],
                row[5],
                None if row[6] is None else bytes(row[6]),
                row[7],
            )
            for row in rows
        ]

    def _drop_vector(self, scope: Scope, rid: int) -> None:
        self._db.execute(
            "DELETE FROM record_vectors WHERE rid = ? AND tenant = ? AND workspace = ?",
            (rid, scope.tenant, scope.workspace),
        )
