"""SQL for the host's operations path, mixed into the one transaction class (see queries.py).

Verification reads text columns CAST AS BLOB: a damaged row must reach the verifier as bytes it can
name, not as a decoding error raised by the driver (whose message would quote the damaged text).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.ports_operations import (
    CandidateStateRow,
    IndexEntry,
    RawJournalRow,
    StateCount,
)
from engram_memory.engine.ranking import FIELDS
from engram_memory.engine.rows import AuditRow, Scope

_FTS_COLUMNS = ", ".join(f"f.f_{name}" for name in FIELDS)


class OperationsQueries:
    """Host-path statements; each names its scope, or says why it spans scopes."""

    _db: sqlite3.Connection

    # -- verification ----------------------------------------------------------------------
    def scope_names(self) -> list[tuple[bytes, bytes]]:
        # Spans scopes on purpose: the verifier must find every scope any table names, even one
        # whose journal or head row is missing.
        rows = self._db.execute(
            "SELECT DISTINCT CAST(tenant AS BLOB), CAST(workspace AS BLOB) FROM ("
            " SELECT tenant, workspace FROM scopes UNION SELECT tenant, workspace FROM journal"
            " UNION SELECT tenant, workspace FROM candidates UNION SELECT tenant, workspace FROM records"
            " UNION SELECT tenant, workspace FROM sealed_bodies) ORDER BY 1, 2"
        ).fetchall()
        return [(bytes(row[0]), bytes(row[1])) for row in rows]

    def journal_rows(self, scope: Scope) -> Iterator[RawJournalRow]:
        rows = self._db.execute(
            "SELECT CAST(tenant AS BLOB), CAST(workspace AS BLOB), cursor, CAST(event_id AS BLOB),"
            " CAST(kind AS BLOB), at_ms, CAST(body AS BLOB), CAST(prev_digest AS BLOB), CAST(event_digest AS BLOB),"
            " affects_records FROM journal WHERE tenant = ? AND workspace = ? ORDER BY cursor",
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
        rows = self._db.execute(
            "SELECT candidate_id, state, adjudication FROM candidates WHERE tenant = ? AND workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchall()
        return [CandidateStateRow(candidate_id=row[0], state=row[1], adjudication=bool(row[2])) for row in rows]

    def record_states(self, scope: Scope) -> dict[str, str]:
        rows = self._db.execute(
            "SELECT record_id, state FROM records WHERE tenant = ? AND workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchall()
        return {str(row[0]): str(row[1]) for row in rows}

    def body_owners(self, scope: Scope) -> set[str]:
        rows = self._db.execute(
            "SELECT owner_id FROM sealed_bodies WHERE tenant = ? AND workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchall()
        return {str(row[0]) for row in rows}

    def index_entries(self, scope: Scope) -> list[IndexEntry]:
        from engram_memory.stores.sqlite.queries import scope_token  # queries.py imports this module

        rows = self._db.execute(
            f"SELECT f.rowid, r.record_id, r.tenant, r.workspace, {_FTS_COLUMNS}"  # noqa: S608
            " FROM lexical_index AS f LEFT JOIN records AS r ON r.rid = f.rowid"
            " WHERE lexical_index MATCH ? ORDER BY f.rowid",
            ('scope : "' + scope_token(scope) + '"',),
        ).fetchall()
        return [
            IndexEntry(
                rowid=int(row[0]),
                record_id=row[1],
                record_scope=None if row[1] is None else Scope(tenant=row[2], workspace=row[3]),
                fields={name: str(value or "") for name, value in zip(FIELDS, row[4:], strict=True)},
            )
            for row in rows
        ]

    def index_row_count(self) -> int:
        # Spans scopes on purpose: rows under a token no scope owns show up only in the total.
        return int(self._db.execute("SELECT count(*) FROM lexical_index").fetchone()[0])

    def index_integrity_ok(self) -> bool:
        try:
            self._db.execute("INSERT INTO lexical_index (lexical_index) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            if "malformed" in str(exc) or "corrupt" in str(exc):
                return False
            raise
        return True

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

    def indexed_counts(self) -> dict[Scope | None, int]:
        rows = self._db.execute(
            "SELECT r.tenant, r.workspace, count(*) FROM lexical_index AS f LEFT JOIN records AS r ON r.rid = f.rowid"
            " GROUP BY r.tenant, r.workspace"
        )
        return {(None if row[0] is None else Scope(row[0], row[1])): int(row[2]) for row in rows}

    # -- audit log -------------------------------------------------------------------------
    def audit_rows(self, since_ms: int | None, until_ms: int | None) -> Iterator[AuditRow]:
        # Spans scopes on purpose: the audit log is the host's record of every call.
        rows = self._db.execute(
            "SELECT audit_id, at_ms, tool, outcome, tenant, workspace, principal, agent_id, session, token_id,"
            " request_digest, response_digest FROM audit_log"
            " WHERE (? IS NULL OR at_ms >= ?) AND (? IS NULL OR at_ms < ?) ORDER BY seq",
            (since_ms, since_ms, until_ms, until_ms),
        )
        for row in rows:
            yield AuditRow(*row)


def _raw(value: bytes | None) -> bytes | None:
    return None if value is None else bytes(value)


@dataclass(frozen=True, slots=True)
class VaultCounts:
    keys: int
    destroyed: int


def vault_counts(path: Path) -> VaultCounts:
    """How many data keys the vault holds and how many it destroyed, read through its own read-only handle.

    Raises ContractError STORE_UNAVAILABLE when the vault cannot be read.
    """
    try:
        db = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
        try:
            keys = int(db.execute("SELECT count(*) FROM data_keys").fetchone()[0])
            destroyed = int(db.execute("SELECT count(*) FROM shredded").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise ContractError(ErrorCode.STORE_UNAVAILABLE) from exc
    return VaultCounts(keys=keys, destroyed=destroyed)
