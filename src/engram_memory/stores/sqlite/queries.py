"""Every SQL statement the embedded store runs, as the methods of one transaction object.

Rows become the engine's frozen dataclasses here and nowhere else. Each query names its scope:
there is no statement that reads or writes across {tenant, workspace} except the host's
confirmation queue and audit log.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from engram_memory.contract.canonical import canonical_json
from engram_memory.engine.ports import (
    Actor,
    AuditRow,
    CandidateRow,
    ConfirmationRow,
    IdempotencyRow,
    IndexedDoc,
    IndexStats,
    JournalEvent,
    RecordRow,
    Scope,
    ScopeHead,
    SealedBody,
)
from engram_memory.engine.ranking import FIELD_WEIGHTS, FIELDS
from engram_memory.stores.sqlite.queries_maintenance import MaintenanceQueries
from engram_memory.stores.sqlite.queries_operations import OperationsQueries
from engram_memory.stores.sqlite.queries_review import ReviewQueries

_FTS_COLUMNS = tuple(f"f_{name}" for name in FIELDS)
_CONTENT_FILTER = "{" + " ".join(_FTS_COLUMNS) + "}"
_BM25_WEIGHTS = ", ".join(["0.0", *(repr(FIELD_WEIGHTS[name]) for name in FIELDS)])
_LEN_COLUMNS = tuple(f"len_{name}" for name in FIELDS)


def scope_token(scope: Scope) -> str:
    """The token that confines a full-text match to one scope inside the shared FTS5 index."""
    return "s" + hashlib.sha256(scope.ref.encode("utf-8")).hexdigest()[:40]


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _match_expression(scope: Scope, terms: Sequence[str]) -> str:
    alternatives = " OR ".join(_phrase(term) for term in terms)
    return f"scope : {_phrase(scope_token(scope))} AND {_CONTENT_FILTER} : ({alternatives})"


class SQLiteTx(ReviewQueries, MaintenanceQueries, OperationsQueries):
    """One open transaction on the connection; the store begins and ends it."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._db = connection

    # -- journal ---------------------------------------------------------------------------
    def head(self, scope: Scope) -> ScopeHead | None:
        row = self._db.execute(
            "SELECT head_cursor, head_digest, records_cursor FROM scopes WHERE tenant = ? AND workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchone()
        return None if row is None else ScopeHead(cursor=row[0], digest=row[1], records_cursor=row[2])

    def append_event(self, event: JournalEvent) -> None:
        scope = event.scope
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
                canonical_json(dict(event.body)).decode("utf-8"),
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
        return bool(self._db.execute("SELECT EXISTS (SELECT 1 FROM journal)").fetchone()[0])

    def events(self, scope: Scope) -> Iterator[JournalEvent]:
        rows = self._db.execute(
            "SELECT cursor, event_id, kind, at_ms, body, prev_digest, event_digest, affects_records"
            " FROM journal WHERE tenant = ? AND workspace = ? ORDER BY cursor",
            (scope.tenant, scope.workspace),
        )
        for row in rows:
            yield JournalEvent(
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

    # -- candidates ------------------------------------------------------------------------
    _CANDIDATE_COLUMNS = (
        "candidate_id, tenant, workspace, state, payload_digest, evidence_digest, principal, agent_id, session,"
        " captured_at_ms, capture_cursor, size_bytes, citation_count, has_attestation, secret_categories,"
        " adjudication, record_id, trust_class, review_reasons"
    )

    @staticmethod
    def _candidate(row: Sequence[Any]) -> CandidateRow:
        return CandidateRow(
            scope=Scope(tenant=row[1], workspace=row[2]),
            candidate_id=row[0],
            state=row[3],
            payload_digest=row[4],
            evidence_digest=row[5],
            actor=Actor(principal=row[6], agent_id=row[7], session=row[8]),
            captured_at_ms=row[9],
            capture_cursor=row[10],
            size_bytes=row[11],
            citation_count=row[12],
            has_attestation=bool(row[13]),
            secret_categories=tuple(json.loads(row[14])),
            adjudication=bool(row[15]),
            record_id=row[16],
            trust_class=row[17],
            review_reasons=tuple(json.loads(row[18])),
        )

    def insert_candidate(self, row: CandidateRow) -> None:
        self._db.execute(
            f"INSERT INTO candidates ({self._CANDIDATE_COLUMNS})"  # noqa: S608
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.candidate_id,
                row.scope.tenant,
                row.scope.workspace,
                row.state,
                row.payload_digest,
                row.evidence_digest,
                row.actor.principal,
                row.actor.agent_id,
                row.actor.session,
                row.captured_at_ms,
                row.capture_cursor,
                row.size_bytes,
                row.citation_count,
                int(row.has_attestation),
                json.dumps(list(row.secret_categories)),
                int(row.adjudication),
                row.record_id,
                row.trust_class,
                json.dumps(list(row.review_reasons)),
            ),
        )

    def get_candidate(self, scope: Scope, candidate_id: str) -> CandidateRow | None:
        row = self._db.execute(
            f"SELECT {self._CANDIDATE_COLUMNS} FROM candidates"  # noqa: S608
            " WHERE candidate_id = ? AND tenant = ? AND workspace = ?",
            (candidate_id, scope.tenant, scope.workspace),
        ).fetchone()
        return None if row is None else self._candidate(row)

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
    _RECORD_COLUMNS = (
        "record_id, tenant, workspace, candidate_id, state, payload_digest, valid_from_ms, valid_to_ms,"
        " expires_at_ms, admitted_at_ms, state_cursor, principal, agent_id, session, captured_at_ms, trust_class,"
        " superseded_by"
    )

    @staticmethod
    def _record(row: Sequence[Any]) -> RecordRow:
        return RecordRow(
            scope=Scope(tenant=row[1], workspace=row[2]),
            record_id=row[0],
            candidate_id=row[3],
            state=row[4],
            payload_digest=row[5],
            valid_from_ms=row[6],
            valid_to_ms=row[7],
            expires_at_ms=row[8],
            admitted_at_ms=row[9],
            state_cursor=row[10],
            actor=Actor(principal=row[11], agent_id=row[12], session=row[13]),
            captured_at_ms=row[14],
            trust_class=row[15],
            superseded_by=row[16],
        )

    def insert_record(self, row: RecordRow) -> None:
        self._db.execute(
            f"INSERT INTO records ({self._RECORD_COLUMNS})"  # noqa: S608
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.record_id,
                row.scope.tenant,
                row.scope.workspace,
                row.candidate_id,
                row.state,
                row.payload_digest,
                row.valid_from_ms,
                row.valid_to_ms,
                row.expires_at_ms,
                row.admitted_at_ms,
                row.state_cursor,
                row.actor.principal,
                row.actor.agent_id,
                row.actor.session,
                row.captured_at_ms,
                row.trust_class,
                row.superseded_by,
            ),
        )

    def get_record(self, scope: Scope, record_id: str) -> RecordRow | None:
        row = self._db.execute(
            f"SELECT {self._RECORD_COLUMNS} FROM records WHERE record_id = ? AND tenant = ? AND workspace = ?",  # noqa: S608
            (record_id, scope.tenant, scope.workspace),
        ).fetchone()
        return None if row is None else self._record(row)

    def set_record_state(self, scope: Scope, record_id: str, state: str, cursor: int) -> None:
        self._db.execute(
            "UPDATE records SET state = ?, state_cursor = ? WHERE record_id = ? AND tenant = ? AND workspace = ?",
            (state, cursor, record_id, scope.tenant, scope.workspace),
        )

    def find_record_by_digest(self, scope: Scope, payload_digest: str, state: str) -> str | None:
        row = self._db.execute(
            "SELECT record_id FROM records WHERE tenant = ? AND workspace = ? AND payload_digest = ?"
            " AND state = ? ORDER BY rid LIMIT 1",
            (scope.tenant, scope.workspace, payload_digest, state),
        ).fetchone()
        return None if row is None else str(row[0])

    # -- sealed bodies ---------------------------------------------------------------------
    def put_body(self, scope: Scope, owner_id: str, body: SealedBody) -> None:
        self._db.execute(
            "INSERT INTO sealed_bodies (owner_id, tenant, workspace, nonce, ciphertext) VALUES (?, ?, ?, ?, ?)",
            (owner_id, scope.tenant, scope.workspace, body.nonce, body.ciphertext),
        )

    def get_body(self, scope: Scope, owner_id: str) -> SealedBody | None:
        row = self._db.execute(
            "SELECT nonce, ciphertext FROM sealed_bodies WHERE owner_id = ? AND tenant = ? AND workspace = ?",
            (owner_id, scope.tenant, scope.workspace),
        ).fetchone()
        if row is None:
            return None
        return SealedBody(nonce=bytes(row[0]), ciphertext=bytes(row[1]))

    def destroy_body(self, scope: Scope, owner_id: str) -> bool:
        cursor = self._db.execute(
            "DELETE FROM sealed_bodies WHERE owner_id = ? AND tenant = ? AND workspace = ?",
            (owner_id, scope.tenant, scope.workspace),
        )
        return cursor.rowcount > 0

    def ended_owners(self, owner_ids: Sequence[str]) -> set[str]:
        # Host housekeeping spans scopes: owner ids are globally unique random ids.
        ended = set()
        for owner_id in owner_ids:
            known = self._db.execute(
                "SELECT EXISTS (SELECT 1 FROM candidates WHERE candidate_id = ?)"
                " OR EXISTS (SELECT 1 FROM records WHERE record_id = ?)",
                (owner_id, owner_id),
            ).fetchone()[0]
            body = self._db.execute("SELECT 1 FROM sealed_bodies WHERE owner_id = ?", (owner_id,)).fetchone()
            if known and body is None:
                ended.add(owner_id)
        return ended

    # -- lexical index ---------------------------------------------------------------------
    def _rid(self, scope: Scope, record_id: str) -> int | None:
        row = self._db.execute(
            "SELECT rid FROM records WHERE record_id = ? AND tenant = ? AND workspace = ?",
            (record_id, scope.tenant, scope.workspace),
        ).fetchone()
        return None if row is None else int(row[0])

    def _shift_stats(self, scope: Scope, docs: int, lengths: Sequence[int]) -> None:
        assignments = ", ".join(f"{column} = {column} + ?" for column in _LEN_COLUMNS)
        cursor = self._db.execute(
            f"UPDATE scopes SET doc_count = doc_count + ?, {assignments} WHERE tenant = ? AND workspace = ?",  # noqa: S608
            (docs, *lengths, scope.tenant, scope.workspace),
        )
        if cursor.rowcount != 1:
            raise sqlite3.IntegrityError("index statistics of a scope with no journal")

    def index_record(self, scope: Scope, record_id: str, fields: Mapping[str, str]) -> None:
        rid = self._rid(scope, record_id)
        if rid is None:
            raise sqlite3.IntegrityError("indexing a record that does not exist")
        values = [fields.get(name, "") for name in FIELDS]
        self._db.execute(
            f"INSERT INTO lexical_index (rowid, scope, {', '.join(_FTS_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
            (rid, scope_token(scope), *values),
        )
        self._shift_stats(scope, 1, [len(value.split()) for value in values])

    def unindex_record(self, scope: Scope, record_id: str) -> bool:
        rid = self._rid(scope, record_id)
        if rid is None:
            return False
        row = self._db.execute(
            f"SELECT {', '.join(_FTS_COLUMNS)} FROM lexical_index WHERE rowid = ?",  # noqa: S608
            (rid,),
        ).fetchone()
        if row is None:
            return False
        self._db.execute("DELETE FROM lexical_index WHERE rowid = ?", (rid,))
        self._shift_stats(scope, -1, [-len(str(value).split()) for value in row])
        return True

    def purge_index(self) -> None:
        # Deleted FTS5 tokens linger in old segments until they are merged away.
        self._db.execute("INSERT INTO lexical_index (lexical_index) VALUES ('optimize')")

    def index_stats(self, scope: Scope) -> IndexStats:
        row = self._db.execute(
            f"SELECT doc_count, {', '.join(_LEN_COLUMNS)} FROM scopes WHERE tenant = ? AND workspace = ?",  # noqa: S608
            (scope.tenant, scope.workspace),
        ).fetchone()
        if row is None:
            return IndexStats(doc_count=0, field_token_totals=dict.fromkeys(FIELDS, 0))
        return IndexStats(doc_count=row[0], field_token_totals=dict(zip(FIELDS, row[1:], strict=True)))

    def lexical_candidates(
        self, scope: Scope, terms: Sequence[str], *, valid_at_ms: int, limit: int
    ) -> list[IndexedDoc]:
        if not terms:
            return []
        rows = self._db.execute(
            f"SELECT r.record_id, {', '.join('f.' + c for c in _FTS_COLUMNS)}, r.valid_from_ms, r.valid_to_ms"  # noqa: S608
            " FROM lexical_index AS f JOIN records AS r ON r.rid = f.rowid"
            " WHERE lexical_index MATCH ? AND r.tenant = ? AND r.workspace = ? AND r.state = 'accepted_current'"
            " AND r.valid_from_ms <= ? AND (r.valid_to_ms IS NULL OR r.valid_to_ms >= ?)"
            " AND (r.expires_at_ms IS NULL OR r.expires_at_ms > ?)"
            f" ORDER BY bm25(lexical_index, {_BM25_WEIGHTS}), r.record_id LIMIT ?",
            (
                _match_expression(scope, terms),
                scope.tenant,
                scope.workspace,
                valid_at_ms,
                valid_at_ms,
                valid_at_ms,
                limit,
            ),
        ).fetchall()
        return [
            IndexedDoc(
                record_id=row[0],
                fields=dict(zip(FIELDS, row[1 : 1 + len(FIELDS)], strict=True)),
                valid_from_ms=row[-2],
                valid_to_ms=row[-1],
            )
            for row in rows
        ]

    def term_doc_counts(self, scope: Scope, terms: Sequence[str]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for term in terms:
            row = self._db.execute(
                "SELECT count(*) FROM lexical_index WHERE lexical_index MATCH ?",
                (_match_expression(scope, [term]),),
            ).fetchone()
            counts[term] = int(row[0])
        return counts

    # -- tombstones ------------------------------------------------------------------------
    def add_tombstone(self, scope: Scope, payload_digest: str, at_ms: int) -> None:
        self._db.execute(
            "INSERT INTO tombstones (tenant, workspace, payload_digest, at_ms) VALUES (?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            (scope.tenant, scope.workspace, payload_digest, at_ms),
        )

    def is_tombstoned(self, scope: Scope, payload_digest: str) -> bool:
        row = self._db.execute(
            "SELECT 1 FROM tombstones WHERE tenant = ? AND workspace = ? AND payload_digest = ?",
            (scope.tenant, scope.workspace, payload_digest),
        ).fetchone()
        return row is not None

    # -- idempotency -----------------------------------------------------------------------
    def get_idempotency(self, scope: Scope, principal: str, key: str) -> IdempotencyRow | None:
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
        self._db.execute(
            "INSERT INTO idempotency (tenant, workspace, principal, idem_key, tool, operation_digest, target,"
            " response, created_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.scope.tenant,
                row.scope.workspace,
                row.principal,
                row.key,
                row.tool,
                row.operation_digest,
                row.target,
                json.dumps(row.response, separators=(",", ":"), ensure_ascii=False),
                row.created_at_ms,
            ),
        )

    # -- confirmations ---------------------------------------------------------------------
    _CONFIRMATION_COLUMNS = (
        "confirmation_id, tenant, workspace, principal, agent_id, session, tool, target, operation_digest,"
        " reason_ref, summary, status, requested_at_ms, decided_at_ms, decided_by, approval_expires_at_ms,"
        " consumed_at_ms"
    )

    @staticmethod
    def _confirmation(row: Sequence[Any]) -> ConfirmationRow:
        return ConfirmationRow(
            confirmation_id=row[0],
            scope=Scope(tenant=row[1], workspace=row[2]),
            actor=Actor(principal=row[3], agent_id=row[4], session=row[5]),
            tool=row[6],
            target=row[7],
            operation_digest=row[8],
            reason_ref=row[9],
            summary=json.loads(row[10]),
            status=row[11],
            requested_at_ms=row[12],
            decided_at_ms=row[13],
            decided_by=row[14],
            approval_expires_at_ms=row[15],
            consumed_at_ms=row[16],
        )

    def find_confirmations(
        self, scope: Scope, principal: str, tool: str, target: str, operation_digest: str
    ) -> list[ConfirmationRow]:
        rows = self._db.execute(
            f"SELECT {self._CONFIRMATION_COLUMNS} FROM confirmations"  # noqa: S608
            " WHERE tenant = ? AND workspace = ? AND principal = ? AND tool = ? AND target = ?"
            " AND operation_digest = ? ORDER BY requested_at_ms, confirmation_id",
            (scope.tenant, scope.workspace, principal, tool, target, operation_digest),
        ).fetchall()
        return [self._confirmation(row) for row in rows]

    def insert_confirmation(self, row: ConfirmationRow) -> None:
        self._db.execute(
            f"INSERT INTO confirmations ({self._CONFIRMATION_COLUMNS})"  # noqa: S608
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self._confirmation_values(row),
        )

    def save_confirmation(self, row: ConfirmationRow) -> None:
        self._db.execute(
            "UPDATE confirmations SET status = ?, decided_at_ms = ?, decided_by = ?, approval_expires_at_ms = ?,"
            " consumed_at_ms = ? WHERE confirmation_id = ?",
            (
                row.status,
                row.decided_at_ms,
                row.decided_by,
                row.approval_expires_at_ms,
                row.consumed_at_ms,
                row.confirmation_id,
            ),
        )

    @staticmethod
    def _confirmation_values(row: ConfirmationRow) -> tuple[Any, ...]:
        return (
            row.confirmation_id,
            row.scope.tenant,
            row.scope.workspace,
            row.actor.principal,
            row.actor.agent_id,
            row.actor.session,
            row.tool,
            row.target,
            row.operation_digest,
            row.reason_ref,
            json.dumps(dict(row.summary), separators=(",", ":"), ensure_ascii=False),
            row.status,
            row.requested_at_ms,
            row.decided_at_ms,
            row.decided_by,
            row.approval_expires_at_ms,
            row.consumed_at_ms,
        )

    def get_confirmation(self, confirmation_id: str) -> ConfirmationRow | None:
        row = self._db.execute(
            f"SELECT {self._CONFIRMATION_COLUMNS} FROM confirmations WHERE confirmation_id = ?",  # noqa: S608
            (confirmation_id,),
        ).fetchone()
        return None if row is None else self._confirmation(row)

    def list_confirmations(self, statuses: Sequence[str] | None) -> list[ConfirmationRow]:
        query = f"SELECT {self._CONFIRMATION_COLUMNS} FROM confirmations"  # noqa: S608
        params: tuple[str, ...] = ()
        if statuses is not None:
            query += " WHERE status IN (" + ", ".join("?" for _ in statuses) + ")"
            params = tuple(statuses)
        rows = self._db.execute(query + " ORDER BY requested_at_ms, confirmation_id", params).fetchall()
        return [self._confirmation(row) for row in rows]

    # -- audit -----------------------------------------------------------------------------
    def append_audit(self, row: AuditRow) -> None:
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
