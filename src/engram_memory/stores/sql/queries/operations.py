"""Statements for the host's operations path, mixed into the one transaction class (see transaction.py).

Verification reads text columns as their stored bytes: a damaged row must reach the verifier as
bytes it can name, not as a decoding error raised by the driver (whose message would quote the
damaged text). The full-text index's own checks are each store's (queries.py of the store).
"""

from __future__ import annotations

from collections.abc import Iterator

from engram_memory.engine.ports.operations import (
    CandidateStateRow,
    RawJournalRow,
    SealedOwner,
    StateCount,
    VectorEntry,
)
from engram_memory.engine.ports.rows import AuditRow, Scope
from engram_memory.stores.sql.base import SqlBase


class OperationsQueries(SqlBase):
    """Host-path statements; each names its scope, or says why it spans scopes."""

    # -- verification ----------------------------------------------------------------------
    def vector_entries(self, scope: Scope) -> list[VectorEntry]:
        self._enter_tenant(scope.tenant)
        rows = self._db.execute(
            "SELECT r.record_id, r.state, v.model FROM record_vectors AS v"
            " LEFT JOIN records AS r ON r.rid = v.rid AND r.tenant = v.tenant AND r.workspace = v.workspace"
            " WHERE v.tenant = ? AND v.workspace = ? ORDER BY v.rid",
            (scope.tenant, scope.workspace),
        ).fetchall()
        return [VectorEntry(row[0], row[1], str(row[2])) for row in rows]

    def scope_names(self) -> list[tuple[bytes, bytes]]:
        # Spans scopes on purpose: the verifier must find every scope any table names, even one
        # whose journal or head row is missing.
        rows = self._db.execute(
            f"SELECT DISTINCT {self._raw('tenant')}, {self._raw('workspace')} FROM ("  # noqa: S608
            " SELECT tenant, workspace FROM scopes UNION SELECT tenant, workspace FROM journal"
            " UNION SELECT tenant, workspace FROM candidates UNION SELECT tenant, workspace FROM records"
            " UNION SELECT tenant, workspace FROM sealed_bodies) AS named ORDER BY 1, 2"
        ).fetchall()
        return [(bytes(row[0]), bytes(row[1])) for row in rows]

    def journal_rows(self, scope: Scope) -> Iterator[RawJournalRow]:
        self._enter_tenant(scope.tenant)
        raw = self._raw
        rows = self._streamed(
            f"SELECT {raw('tenant')}, {raw('workspace')}, cursor, {raw('event_id')}, {raw('kind')}, at_ms,"  # noqa: S608
            f" {raw('body')}, {raw('prev_digest')}, {raw('event_digest')}, affects_records FROM journal"
            " WHERE tenant = ? AND workspace = ? ORDER BY cursor",
            (scope.tenant, scope.workspace),
        )
        for row in rows:
            yield RawJournalRow(
                tenant=_raw(row[0]) or b"",
                workspace=_raw(row[1]) or b"",
                cursor=row[2],
                event_id=_raw(row[3]),
                kind=_raw(row[4]),
                at_ms=row[5],
                body=_raw(row[6]),
                prev_digest=_raw(row[7]),
                event_digest=_raw(row[8]),
                affects_records=row[9],
            )

    def candidate_states(self, scope: Scope) -> list[CandidateStateRow]:
        self._enter_tenant(scope.tenant)
        rows = self._db.execute(
            "SELECT candidate_id, state, adjudication FROM candidates WHERE tenant = ? AND workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchall()
        return [CandidateStateRow(candidate_id=row[0], state=row[1], adjudication=bool(row[2])) for row in rows]

    def record_states(self, scope: Scope) -> dict[str, str]:
        self._enter_tenant(scope.tenant)
        rows = self._db.execute(
            "SELECT record_id, state FROM records WHERE tenant = ? AND workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchall()
        return {str(row[0]): str(row[1]) for row in rows}

    def body_owners(self, scope: Scope) -> set[str]:
        self._enter_tenant(scope.tenant)
        rows = self._db.execute(
            "SELECT owner_id FROM sealed_bodies WHERE tenant = ? AND workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchall()
        return {str(row[0]) for row in rows}

    def sealed_owners(self) -> list[SealedOwner]:
        # Spans scopes: a restore settles every body against the host's key vault.
        rows = self._db.execute(
            "SELECT b.owner_id, b.tenant, b.workspace,"
            " CASE WHEN r.record_id IS NOT NULL THEN 'record' WHEN c.candidate_id IS NOT NULL THEN 'candidate'"
            " ELSE 'none' END, COALESCE(r.state, c.state)"
            " FROM sealed_bodies AS b"
            " LEFT JOIN records AS r ON r.record_id = b.owner_id AND r.tenant = b.tenant AND r.workspace = b.workspace"
            " LEFT JOIN candidates AS c ON c.candidate_id = b.owner_id AND c.tenant = b.tenant"
            " AND c.workspace = b.workspace"
            " ORDER BY b.tenant, b.workspace, b.owner_id"
        ).fetchall()
        return [
            SealedOwner(scope=Scope(tenant=row[1], workspace=row[2]), owner_id=row[0], kind=row[3], state=row[4])
            for row in rows
        ]

    # -- statistics ------------------------------------------------------------------------
    # The counts below span scopes on purpose: statistics are the host's view of the whole store.
    def candidate_state_counts(self) -> list[StateCount]:
        rows = self._db.execute(
            "SELECT tenant, workspace, state, adjudication, count(*) FROM candidates"
            " GROUP BY tenant, workspace, state, adjudication ORDER BY tenant, workspace, state"
        ).fetchall()
        return [StateCount(Scope(row[0], row[1]), row[2], int(row[4]), bool(row[3])) for row in rows]

    def record_state_counts(self) -> list[StateCount]:
        rows = self._db.execute(
            "SELECT tenant, workspace, state, count(*) FROM records"
            " GROUP BY tenant, workspace, state ORDER BY tenant, workspace, state"
        ).fetchall()
        return [StateCount(Scope(row[0], row[1]), row[2], int(row[3])) for row in rows]

    def journal_event_counts(self) -> dict[Scope, int]:
        rows = self._db.execute("SELECT tenant, workspace, count(*) FROM journal GROUP BY tenant, workspace")
        return {Scope(row[0], row[1]): int(row[2]) for row in rows}

    # -- audit log -------------------------------------------------------------------------
    def audit_rows(self, since_ms: int | None, until_ms: int | None) -> Iterator[AuditRow]:
        # Spans scopes on purpose: the audit log is the host's record of every call.
        bounds: list[str] = []
        params: list[int] = []
        if since_ms is not None:
            bounds.append("at_ms >= ?")
            params.append(since_ms)
        if until_ms is not None:
            bounds.append("at_ms < ?")
            params.append(until_ms)
        where = (" WHERE " + " AND ".join(bounds)) if bounds else ""
        rows = self._streamed(
            "SELECT audit_id, at_ms, tool, outcome, tenant, workspace, principal, agent_id, session, token_id,"  # noqa: S608
            f" request_digest, response_digest FROM audit_log{where} ORDER BY seq",
            tuple(params),
        )
        for row in rows:
            yield AuditRow(*row)


def _raw(value: bytes | None) -> bytes | None:
    return None if value is None else bytes(value)
