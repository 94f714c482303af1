"""The store port's statements that read the same in SQLite and PostgreSQL, as the methods of one transaction.

Rows become the engine's frozen dataclasses here and nowhere else. Each query names its scope:
there is no statement that reads or writes across {tenant, workspace} except the host's
confirmation queue and audit log. The full-text index differs per store and lives in each
store's own transaction class, which inherits everything else from here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

from engram_memory.contract.canonical import canonical_json
from engram_memory.engine.ports.lexical import FIELDS
from engram_memory.engine.ports.store import (
    AuditRow,
    CandidateRow,
    IdempotencyRow,
    IndexStats,
    JournalEvent,
    RecordRow,
    Scope,
    ScopeHead,
    SealedBody,
)
from engram_memory.stores.sql.base import StoreInvariantError
from engram_memory.stores.sql.connection import SqlConnection
from engram_memory.stores.sql.queries.confirmations import ConfirmationQueries
from engram_memory.stores.sql.queries.index_reads import IndexReads
from engram_memory.stores.sql.queries.maintenance import MaintenanceQueries
from engram_memory.stores.sql.queries.operations import OperationsQueries
from engram_memory.stores.sql.queries.review import ReviewQueries
from engram_memory.stores.sql.queries.vectors import VectorQueries
from engram_memory.stores.sql.rows import (
    CANDIDATE_COLUMNS,
    EVENT_COLUMNS,
    IDEMPOTENCY_COLUMNS,
    RECORD_COLUMNS,
    candidate_row,
    candidate_values,
    event_row,
    idempotency_values,
    record_row,
    record_values,
)

LEN_COLUMNS = tuple(f"len_{name}" for name in FIELDS)

ENDED_OWNERS_CHUNK = 500  # owner ids per statement: twice this many parameters, under SQLite's limit


class SqlTx(ConfirmationQueries, ReviewQueries, MaintenanceQueries, OperationsQueries, VectorQueries, IndexReads):
    """One open transaction; the store begins and ends it. Subclasses add the full-text index."""

    def __init__(self, connection: SqlConnection) -> None:
        self._db = connection

    # -- journal ---------------------------------------------------------------------------
    def event_digest(self, scope: Scope, cursor: int) -> str | None:
        self._enter_tenant(scope.tenant)
        row = self._db.execute(
            "SELECT event_digest FROM journal WHERE tenant = ? AND workspace = ? AND cursor = ?",
            (scope.tenant, scope.workspace, cursor),
        ).fetchone()
        return None if row is None else str(row[0])

    def head(self, scope: Scope) -> ScopeHead | None:
        self._enter_tenant(scope.tenant)
        row = self._db.execute(
            "SELECT head_cursor, head_digest, records_cursor FROM scopes WHERE tenant = ? AND workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchone()
        return None if row is None else ScopeHead(cursor=row[0], digest=row[1], records_cursor=row[2])

    def append_event(self, event: JournalEvent) -> None:
        scope = event.scope
        self._enter_tenant(scope.tenant)
        self._db.execute(
            "INSERT INTO journal (tenant, workspace, cursor, event_id, kind, at_ms, body, prev_digest,"
            " event_digest, affects_records) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                scope.tenant,
                scope.workspace,
                event.cursor,
                event.event_id,
                event.kind,
                event.at_ms,
                (event.body_json or canonical_json(dict(event.body))).decode("utf-8"),
                event.prev_digest,
                event.event_digest,
                int(event.affects_records),
            ),
        )
        records_cursor = event.cursor if event.affects_records else None
        self._db.execute(
            "INSERT INTO scopes (tenant, workspace, head_cursor, head_digest, records_cursor)"
            " VALUES (?, ?, ?, ?, COALESCE(?, 0))"
            " ON CONFLICT (tenant, workspace) DO UPDATE SET head_cursor = excluded.head_cursor,"
            " head_digest = excluded.head_digest,"
            " records_cursor = COALESCE(?, scopes.records_cursor)",
            (scope.tenant, scope.workspace, event.cursor, event.event_digest, records_cursor, records_cursor),
        )

    def any_journal(self) -> bool:
        # Spans scopes on purpose: whether the store holds any data at all (init refuses fresh keys then).
        return bool(self._db.execute("SELECT EXISTS (SELECT 1 FROM journal)").fetchone()[0])

    def events(self, scope: Scope) -> Iterator[JournalEvent]:
        self._enter_tenant(scope.tenant)
        rows = self._db.execute(
            f"SELECT {EVENT_COLUMNS} FROM journal WHERE tenant = ? AND workspace = ? ORDER BY cursor",  # noqa: S608
            (scope.tenant, scope.workspace),
        )
        for row in rows:
            yield event_row(scope, row)

    # -- candidates ------------------------------------------------------------------------
    def insert_candidate(self, row: CandidateRow) -> None:
        self._enter_tenant(row.scope.tenant)
        self._db.execute(
            f"INSERT INTO candidates ({CANDIDATE_COLUMNS})"  # noqa: S608
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            candidate_values(row),
        )

    def get_candidate(self, scope: Scope, candidate_id: str) -> CandidateRow | None:
        self._enter_tenant(scope.tenant)
        row = self._db.execute(
            f"SELECT {CANDIDATE_COLUMNS} FROM candidates"  # noqa: S608
            " WHERE candidate_id = ? AND tenant = ? AND workspace = ?",
            (candidate_id, scope.tenant, scope.workspace),
        ).fetchone()
        return None if row is None else candidate_row(row)

    def update_candidate(
        self,
        scope: Scope,
        candidate_id: str,
        *,
        state: str,
        adjudication: bool,
        record_id: str | None,
        review_reasons: Sequence[str] = (),
    ) -> None:
        self._enter_tenant(scope.tenant)
        self._db.execute(
            "UPDATE candidates SET state = ?, adjudication = ?, record_id = ?, review_reasons = ?"
            " WHERE candidate_id = ? AND tenant = ? AND workspace = ?",
            (
                state,
                int(adjudication),
                record_id,
                json.dumps(list(review_reasons)),
                candidate_id,
                scope.tenant,
                scope.workspace,
            ),
        )

    # -- records ---------------------------------------------------------------------------
    def insert_record(self, row: RecordRow) -> None:
        self._enter_tenant(row.scope.tenant)
        self._db.execute(
            f"INSERT INTO records ({RECORD_COLUMNS})"  # noqa: S608
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            record_values(row),
        )

    def get_record(self, scope: Scope, record_id: str) -> RecordRow | None:
        self._enter_tenant(scope.tenant)
        row = self._db.execute(
            f"SELECT {RECORD_COLUMNS} FROM records WHERE record_id = ? AND tenant = ? AND workspace = ?",  # noqa: S608
            (record_id, scope.tenant, scope.workspace),
        ).fetchone()
        return None if row is None else record_row(row)

    def get_records(self, scope: Scope, record_ids: Sequence[str]) -> dict[str, RecordRow]:
        if not record_ids:
            return {}
        self._enter_tenant(scope.tenant)
        marks = ", ".join("?" for _ in record_ids)
        rows = self._db.execute(
            f"SELECT {RECORD_COLUMNS} FROM records WHERE record_id IN ({marks}) AND {self._SCOPE_OF_IDS}",  # noqa: S608
            (*record_ids, scope.tenant, scope.workspace),
        ).fetchall()
        return {found.record_id: found for found in map(record_row, rows)}

    def set_record_state(self, scope: Scope, record_id: str, state: str, cursor: int) -> None:
        self._enter_tenant(scope.tenant)
        self._db.execute(
            "UPDATE records SET state = ?, state_cursor = ? WHERE record_id = ? AND tenant = ? AND workspace = ?",
            (state, cursor, record_id, scope.tenant, scope.workspace),
        )

    def find_record_by_digest(self, scope: Scope, payload_digest: str, state: str) -> str | None:
        self._enter_tenant(scope.tenant)
        row = self._db.execute(
            "SELECT record_id FROM records WHERE tenant = ? AND workspace = ? AND payload_digest = ?"
            " AND state = ? ORDER BY rid LIMIT 1",
            (scope.tenant, scope.workspace, payload_digest, state),
        ).fetchone()
        return None if row is None else str(row[0])

    # -- sealed bodies ---------------------------------------------------------------------
    def put_body(self, scope: Scope, owner_id: str, body: SealedBody) -> None:
        self._enter_tenant(scope.tenant)
        self._db.execute(
            "INSERT INTO sealed_bodies (owner_id, tenant, workspace, nonce, ciphertext) VALUES (?, ?, ?, ?, ?)",
            (owner_id, scope.tenant, scope.workspace, body.nonce, body.ciphertext),
        )

    def get_body(self, scope: Scope, owner_id: str) -> SealedBody | None:
        self._enter_tenant(scope.tenant)
        row = self._db.execute(
            "SELECT nonce, ciphertext FROM sealed_bodies WHERE owner_id = ? AND tenant = ? AND workspace = ?",
            (owner_id, scope.tenant, scope.workspace),
        ).fetchone()
        if row is None:
            return None
        return SealedBody(nonce=bytes(row[0]), ciphertext=bytes(row[1]))

    def get_bodies(self, scope: Scope, owner_ids: Sequence[str]) -> dict[str, SealedBody]:
        if not owner_ids:
            return {}
        self._enter_tenant(scope.tenant)
        marks = ", ".join("?" for _ in owner_ids)
        rows = self._db.execute(
            "SELECT owner_id, nonce, ciphertext FROM sealed_bodies"  # noqa: S608
            f" WHERE owner_id IN ({marks}) AND {self._SCOPE_OF_IDS}",
            (*owner_ids, scope.tenant, scope.workspace),
        ).fetchall()
        return {str(row[0]): SealedBody(nonce=bytes(row[1]), ciphertext=bytes(row[2])) for row in rows}

    def destroy_body(self, scope: Scope, owner_id: str) -> bool:
        self._enter_tenant(scope.tenant)
        cursor = self._db.execute(
            "DELETE FROM sealed_bodies WHERE owner_id = ? AND tenant = ? AND workspace = ?",
            (owner_id, scope.tenant, scope.workspace),
        )
        return cursor.rowcount > 0

    def discard_body(self, scope: Scope, owner_id: str) -> None:
        self.destroy_body(scope, owner_id)

    def ended_owners(self, owner_ids: Sequence[str]) -> set[str]:
        # Host housekeeping spans scopes: owner ids are globally unique random ids. One statement per
        # chunk, so a sweep over a large vault costs a few index probes per key, not round trips.
        ended: set[str] = set()
        unique = sorted(set(owner_ids))
        for first in range(0, len(unique), ENDED_OWNERS_CHUNK):
            chunk = unique[first : first + ENDED_OWNERS_CHUNK]
            marks = ", ".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT candidate_id FROM candidates c WHERE candidate_id IN ({marks})"  # noqa: S608 (only ?s)
                " AND NOT EXISTS (SELECT 1 FROM sealed_bodies b WHERE b.owner_id = c.candidate_id)"
                f" UNION SELECT record_id FROM records r WHERE record_id IN ({marks})"
                " AND NOT EXISTS (SELECT 1 FROM sealed_bodies b WHERE b.owner_id = r.record_id)",
                (*chunk, *chunk),
            ).fetchall()
            ended.update(str(row[0]) for row in rows)
        return ended

    # -- lexical index: what both stores keep alike (the index itself is the subclass's) -----------
    def _rid(self, scope: Scope, record_id: str) -> int | None:
        self._enter_tenant(scope.tenant)
        row = self._db.execute(
            "SELECT rid FROM records WHERE record_id = ? AND tenant = ? AND workspace = ?",
            (record_id, scope.tenant, scope.workspace),
        ).fetchone()
        return None if row is None else int(row[0])

    def _shift_stats(self, scope: Scope, docs: int, lengths: Sequence[int], tokenizer: str | None = None) -> None:
        """Keeps the scope's document count and per-field token totals (BM25F's corpus statistics).

        A scope with no entry yet takes the tokenizer of the entry being added; one with entries keeps
        the tokenizer that built them until a re-index moves it (set_index_tokenizer).
        """
        self._enter_tenant(scope.tenant)
        assignments = ", ".join(f"{column} = {column} + ?" for column in LEN_COLUMNS)
        cursor = self._db.execute(
            f"UPDATE scopes SET doc_count = doc_count + ?, {assignments},"  # noqa: S608
            " tokenizer = CASE WHEN doc_count = 0 THEN COALESCE(?, tokenizer) ELSE tokenizer END"
            " WHERE tenant = ? AND workspace = ?",
            (docs, *lengths, tokenizer, scope.tenant, scope.workspace),
        )
        if cursor.rowcount != 1:
            raise StoreInvariantError("index statistics of a scope with no journal")

    def index_stats(self, scope: Scope) -> IndexStats:
        self._enter_tenant(scope.tenant)
        row = self._db.execute(
            f"SELECT doc_count, {', '.join(LEN_COLUMNS)}, tokenizer FROM scopes"  # noqa: S608
            " WHERE tenant = ? AND workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchone()
        if row is None:
            return IndexStats(doc_count=0, field_token_totals=dict.fromkeys(FIELDS, 0))
        return IndexStats(
            doc_count=row[0], field_token_totals=dict(zip(FIELDS, row[1:-1], strict=True)), tokenizer=row[-1]
        )

    def set_index_tokenizer(self, scope: Scope, tokenizer: str) -> None:
        self._enter_tenant(scope.tenant)
        self._db.execute(
            "UPDATE scopes SET tokenizer = ? WHERE tenant = ? AND workspace = ?",
            (tokenizer, scope.tenant, scope.workspace),
        )

    # -- tombstones ------------------------------------------------------------------------
    def add_tombstone(self, scope: Scope, fingerprints: Sequence[str], at_ms: int) -> None:
        # The column keeps its first name: it held plain payload digests before the keyed fingerprints.
        self._enter_tenant(scope.tenant)
        for fingerprint in sorted(set(fingerprints)):
            self._db.execute(
                "INSERT INTO tombstones (tenant, workspace, payload_digest, at_ms) VALUES (?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (scope.tenant, scope.workspace, fingerprint, at_ms),
            )

    def is_tombstoned(self, scope: Scope, fingerprints: Sequence[str]) -> bool:
        wanted = sorted(set(fingerprints))
        if not wanted:
            return False
        self._enter_tenant(scope.tenant)
        marks = ", ".join("?" * len(wanted))  # a few fingerprints per call: one statement, one round trip
        row = self._db.execute(
            "SELECT 1 FROM tombstones WHERE tenant = ? AND workspace = ?"  # noqa: S608 (placeholders only)
            f" AND payload_digest IN ({marks}) LIMIT 1",
            (scope.tenant, scope.workspace, *wanted),
        ).fetchone()
        return row is not None

    def holds_tombstones(self, scope: Scope) -> bool:
        self._enter_tenant(scope.tenant)
        row = self._db.execute(
            "SELECT EXISTS (SELECT 1 FROM tombstones WHERE tenant = ? AND workspace = ?)",
            (scope.tenant, scope.workspace),
        ).fetchone()
        return bool(row[0])

    # -- reconciliation families -------------------------------------------------------------
    def add_record_families(self, scope: Scope, record_id: str, family_keys: Sequence[str]) -> None:
        self._enter_tenant(scope.tenant)
        for family_key in sorted(set(family_keys)):
            self._db.execute(
                "INSERT INTO record_families (tenant, workspace, family_key, record_id) VALUES (?, ?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (scope.tenant, scope.workspace, family_key, record_id),
            )

    def family_records(self, scope: Scope, family_keys: Sequence[str]) -> dict[str, list[str]]:
        wanted = sorted(set(family_keys))
        found: dict[str, list[str]] = {key: [] for key in wanted}
        if not wanted:
            return found
        self._enter_tenant(scope.tenant)
        marks = ", ".join("?" * len(wanted))
        rows = self._db.execute(
            "SELECT f.family_key, f.record_id FROM record_families f JOIN records r"  # noqa: S608 (placeholders only)
            " ON r.tenant = f.tenant AND r.workspace = f.workspace AND r.record_id = f.record_id"
            f" WHERE f.tenant = ? AND f.workspace = ? AND f.family_key IN ({marks}) ORDER BY r.rid",
            (scope.tenant, scope.workspace, *wanted),
        ).fetchall()
        for family_key, record_id in rows:
            found[str(family_key)].append(str(record_id))
        return found

    def drop_record_families(self, scope: Scope, record_id: str) -> bool:
        self._enter_tenant(scope.tenant)
        cursor = self._db.execute(
            "DELETE FROM record_families WHERE tenant = ? AND workspace = ? AND record_id = ?",
            (scope.tenant, scope.workspace, record_id),
        )
        return bool(cursor.rowcount)

    # -- idempotency -----------------------------------------------------------------------
    def get_idempotency(self, scope: Scope, principal: str, key: str) -> IdempotencyRow | None:
        self._enter_tenant(scope.tenant)
        row = self._db.execute(
            "SELECT tool, operation_digest, target, response, created_at_ms FROM idempotency"
            " WHERE tenant = ? AND workspace = ? AND principal = ? AND idem_key = ?",
            (scope.tenant, scope.workspace, principal, key),
        ).fetchone()
        if row is None:
            return None
        return IdempotencyRow(
            scope=scope,
            principal=principal,
            key=key,
            tool=row[0],
            operation_digest=row[1],
            target=row[2],
            response=json.loads(row[3]),
            created_at_ms=row[4],
        )

    def put_idempotency(self, row: IdempotencyRow) -> None:
        self._enter_tenant(row.scope.tenant)
        self._db.execute(
            f"INSERT INTO idempotency ({IDEMPOTENCY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
            idempotency_values(row),
        )

    # -- audit -----------------------------------------------------------------------------
    def append_audit(self, row: AuditRow) -> None:
        if row.tenant is not None:
            self._enter_tenant(row.tenant)
        self._db.execute(
            "INSERT INTO audit_log (audit_id, at_ms, tool, outcome, tenant, workspace, principal, agent_id,"
            " session, token_id, request_digest, response_digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.audit_id,
                row.at_ms,
                row.tool,
                row.outcome,
                row.tenant,
                row.workspace,
                row.principal,
                row.agent_id,
                row.session,
                row.token_id,
                row.request_digest,
                row.response_digest,
            ),
        )
