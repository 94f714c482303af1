"""The server store's transaction: the shared statements (stores/sql) plus its tsvector full-text index.

Row-level security needs every transaction to name its tenant: `_enter_tenant` sets `app.tenant`
for the rest of the transaction (set_config(..., true)) the first time a statement touches a scope,
and again whenever a host-path transaction moves on to another tenant's rows.

The index keeps the engine's tokens per field, impact-ordered postings of them (postings.py) and a
weighted tsvector (GIN). Candidates come from the postings, as on the embedded store; the tsvector
serves a query of stop words alone and a scope whose validity filters drop most of the postings' best,
ranked by ts_rank (ties by record id). The engine re-scores every pool with BM25F.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engram_memory.engine.ports.lexical import FIELD_WEIGHTS, FIELDS
from engram_memory.engine.ports.rows import (
    AuditRow,
)
from engram_memory.engine.ports.store import IndexedDoc, IndexStats, Scope
from engram_memory.stores.postgres import postings
from engram_memory.stores.postgres.connection import PsycopgConnection
from engram_memory.stores.postgres.deferred import IndexEntry as DeferredEntry
from engram_memory.stores.postgres.deferred import (
    PendingWrites,
)
from engram_memory.stores.postgres.heads import HeadCache
from engram_memory.stores.postgres.held_tx import HeldRowsTx
from engram_memory.stores.postgres.lexemes import index_tsvector, lexeme, quoted, scope_token
from engram_memory.stores.postgres.lock_facts import LockFacts
from engram_memory.stores.sql import postings as postings_rules
from engram_memory.stores.sql.base import StoreInvariantError
from engram_memory.stores.sql.queries.index_reads import FIELD_COLUMNS

AUDIT_FIELDS = tuple(field.name for field in dataclasses.fields(AuditRow))  # audit_log's columns, named alike
# ts_rank's weights for the labels {D, C, B, A}, scaled so the heaviest field (primary, A) counts 1.
_TOP = FIELD_WEIGHTS["primary"]
_RANK_WEIGHTS = (
    "{"
    + ", ".join(
        f"{w / _TOP:.4f}"
        for w in (
            FIELD_WEIGHTS["context"],
            FIELD_WEIGHTS["evidence"],
            FIELD_WEIGHTS["decision"],
            FIELD_WEIGHTS["primary"],
        )
    )
    + "}"
)


def any_term_query(terms: Sequence[str]) -> str:
    """A tsquery matching any of the terms, built without a text-search parser or dictionary."""
    return " | ".join(quoted(lexeme(term)) for term in terms)


def in_scope_query(scope: Scope, terms: Sequence[str]) -> str:
    """The terms, confined to the scope's rows by its lexeme."""
    return f"{quoted('scope:' + scope_token(scope))} & ({any_term_query(terms)})"


class PostgresTx(HeldRowsTx):
    """One open transaction on a pooled connection; the store begins and ends it."""

    _db: PsycopgConnection

    def __init__(
        self,
        connection: PsycopgConnection,
        *,
        snapshot: bool = False,
        tenant: str | None = None,
        heads: HeadCache | None = None,
        pending: PendingWrites | None = None,
        facts: LockFacts | None = None,
    ) -> None:
        """`snapshot`: a read-only REPEATABLE READ transaction, whose statistics cannot change under it, so
        a search that asks for them three times reads them once (each read is a round trip). `tenant`:
        the tenant the transaction already set (app.tenant) before this object saw it. `heads`: a batch's
        scope heads (heads.py), each read a round trip saved. `pending`: a batch's rows held back
        (deferred.py): this transaction's writes of the hot path go there, and its reads look there first.
        `facts`: what the batch may remember while it holds a scope's lock (lock_facts.py)."""
        super().__init__(connection, heads=heads, pending=pending, facts=facts)
        self._tenant: str | None = tenant
        self._snapshot = snapshot
        self._stats: dict[Scope, IndexStats] = {}
        self._docs: dict[tuple[Scope, str], int] = {}

    @property
    def tenant(self) -> str | None:
        """The tenant row-level security sees now (app.tenant), as this transaction last set it."""
        return self._tenant

    @property
    def connection(self) -> PsycopgConnection:
        """The transaction's connection, for the host's whole-store snapshot (stores/postgres/snapshot.py)."""
        return self._db

    def relax_commit(self) -> None:
        """This transaction's commit returns before its WAL is flushed (Store.write(synced=False))."""
        self._db.execute("SET LOCAL synchronous_commit TO OFF")

    def append_audits(self, rows: Sequence[AuditRow]) -> None:
        """Many audit rows in one statement per tenant (row-level security checks each row against
        app.tenant), in the order given within a tenant."""
        by_tenant: dict[str | None, list[AuditRow]] = {}
        for row in rows:
            by_tenant.setdefault(row.tenant, []).append(row)
        for tenant, group in by_tenant.items():
            if tenant is not None:
                self._enter_tenant(tenant)
            self._db.execute(
                f"INSERT INTO audit_log ({', '.join(AUDIT_FIELDS)}) SELECT * FROM unnest("  # noqa: S608
                + ", ".join("?::text[]" if name != "at_ms" else "?::bigint[]" for name in AUDIT_FIELDS)
                + ")",
                tuple([getattr(row, name) for row in group] for name in AUDIT_FIELDS),
            )

    # -- the dialect -------------------------------------------------------------------------------
    def _enter_tenant(self, tenant: str) -> None:
        if tenant != self._tenant:
            self._db.execute("SELECT set_config('app.tenant', ?, true)", (tenant,))
            self._tenant = tenant

    def _streamed(self, sql: str, parameters: Sequence[Any]) -> Iterable[Sequence[Any]]:
        # psycopg's ordinary cursor holds the whole result; a journal of a million memories is gigabytes.
        return self._db.stream(sql, parameters)

    @staticmethod
    def _json_text(column: str, *path: str) -> str:
        return f"({column}::jsonb #>> '{{{','.join(path)}}}')"

    @staticmethod
    def _raw(column: str) -> str:
        return f"convert_to({column}, 'UTF8')"

    # -- lexical index ---------------------------------------------------------------------
    def index_record(self, scope: Scope, record_id: str, fields: Mapping[str, str], *, tokenizer: str) -> None:
        values = [fields.get(name, "") for name in FIELDS]
        tsv = index_tsvector(scope_token(scope), values)
        if self._pending is not None and self._pending.record(scope, record_id) is not None:
            self._pending.add(DeferredEntry(scope, record_id, tuple(values), tsv, tokenizer))
            return
        rid = self._rid(scope, record_id)
        if rid is None:
            raise StoreInvariantError("indexing a record that does not exist")
        self._db.execute(
            f"INSERT INTO lexical_index (rid, tenant, workspace, scope_token, {', '.join(FIELD_COLUMNS)}, tsv)"  # noqa: S608
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?::tsvector)",
            (rid, scope.tenant, scope.workspace, scope_token(scope), *values, tsv),
        )
        postings.add(self._db, scope, rid, dict(zip(FIELDS, values, strict=True)))
        self._shift_stats(scope, 1, [len(value.split()) for value in values], tokenizer)

    def unindex_record(self, scope: Scope, record_id: str) -> bool:
        rid = self._rid(scope, record_id)
        if rid is None:
            return False
        self._drop_vector(scope, rid)
        row = self._db.execute(
            f"DELETE FROM lexical_index WHERE rid = ? AND tenant = ? AND workspace = ?"  # noqa: S608
            f" RETURNING {', '.join(FIELD_COLUMNS)}",
            (rid, scope.tenant, scope.workspace),
        ).fetchone()
        if row is None:
            return False
        postings.drop(self._db, scope, rid, {name: str(value or "") for name, value in zip(FIELDS, row, strict=True)})
        self._shift_stats(scope, -1, [-len(str(value).split()) for value in row])
        return True

    def reindex_record(self, scope: Scope, record_id: str, fields: Mapping[str, str]) -> bool:
        rid = self._rid(scope, record_id)
        if rid is None:
            return False
        row = self._db.execute(
            f"SELECT {', '.join(FIELD_COLUMNS)} FROM lexical_index"  # noqa: S608
            " WHERE rid = ? AND tenant = ? AND workspace = ?",
            (rid, scope.tenant, scope.workspace),
        ).fetchone()
        values = [fields.get(name, "") for name in FIELDS]
        if row is None or [str(value) for value in row] == values:
            return False
        assignments = ", ".join(f"{column} = ?" for column in FIELD_COLUMNS)
        self._db.execute(
            f"UPDATE lexical_index SET {assignments}, tsv = ?::tsvector"  # noqa: S608
            " WHERE rid = ? AND tenant = ? AND workspace = ?",
            (*values, index_tsvector(scope_token(scope), values), rid, scope.tenant, scope.workspace),
        )
        postings.drop(self._db, scope, rid, {name: str(value or "") for name, value in zip(FIELDS, row, strict=True)})
        postings.add(self._db, scope, rid, dict(zip(FIELDS, values, strict=True)))
        self._shift_stats(
            scope, 0, [len(new.split()) - len(str(old).split()) for old, new in zip(row, values, strict=True)]
        )
        return True

    def purge_index(self) -> None:
        # Spans scopes on purpose: one request, naming nobody, that the index table be rewritten once
        # this commits (erase_physically, by the owner), so the deleted tokens leave its pages.
        self._db.execute("INSERT INTO erasure_requests DEFAULT VALUES")

    def lexical_candidates(
        self, scope: Scope, terms: Sequence[str], *, valid_at_ms: int, limit: int
    ) -> list[IndexedDoc]:
        if not terms:
            return []
        self._enter_tenant(scope.tenant)
        # As the embedded store (stores/sqlite/queries.py): the postings give the likely best rids, records
        # and field texts are read for those few; when validity and expiry drop so many of a full batch
        # that fewer than `limit` remain, or the query is stop words alone, the tsvector ranks the scope.
        batch = limit + 32
        posted = postings_rules.posted(terms)
        if not posted:
            return self._all_candidates(scope, terms, valid_at_ms, limit)
        counts = self.term_doc_counts(scope, posted)
        top = postings.best(self._db, scope, counts, self.index_stats(scope).doc_count, batch)
        if not top:
            return []
        rows = self._db.execute(
            f"SELECT r.rid, r.record_id, {', '.join('f.' + c for c in FIELD_COLUMNS)}, r.valid_from_ms, r.valid_to_ms"  # noqa: S608
            " FROM unnest(?::bigint[]) AS ranked (rid) JOIN records AS r ON r.rid = ranked.rid"
            " JOIN lexical_index AS f ON f.rid = r.rid"
            " WHERE r.tenant = ? AND r.workspace = ? AND r.state = 'accepted_current'"
            " AND f.tenant = ? AND f.workspace = ?"
            " AND r.valid_from_ms <= ? AND (r.valid_to_ms IS NULL OR r.valid_to_ms >= ?)"
            " AND (r.expires_at_ms IS NULL OR r.expires_at_ms > ?)",
            (top, scope.tenant, scope.workspace, scope.tenant, scope.workspace, valid_at_ms, valid_at_ms, valid_at_ms),
        ).fetchall()
        if len(rows) < limit and len(top) == batch:
            return self._all_candidates(scope, terms, valid_at_ms, limit)
        order = {rid: position for position, rid in enumerate(top)}
        rows.sort(key=lambda row: order[int(row[0])])
        return [_indexed_doc(row[1:]) for row in rows[:limit]]

    def _all_candidates(self, scope: Scope, terms: Sequence[str], valid_at_ms: int, limit: int) -> list[IndexedDoc]:
        rows = self._db.execute(
            f"SELECT r.record_id, {', '.join('f.' + c for c in FIELD_COLUMNS)}, r.valid_from_ms, r.valid_to_ms"  # noqa: S608
            " FROM lexical_index AS f JOIN records AS r ON r.rid = f.rid"
            " WHERE f.tsv @@ ?::tsquery AND f.tenant = ? AND f.workspace = ?"
            " AND r.tenant = ? AND r.workspace = ? AND r.state = 'accepted_current'"
            " AND r.valid_from_ms <= ? AND (r.valid_to_ms IS NULL OR r.valid_to_ms >= ?)"
            " AND (r.expires_at_ms IS NULL OR r.expires_at_ms > ?)"
            f" ORDER BY ts_rank('{_RANK_WEIGHTS}', f.tsv, ?::tsquery) DESC, r.record_id LIMIT ?",
            (
                in_scope_query(scope, terms),
                scope.tenant,
                scope.workspace,
                scope.tenant,
                scope.workspace,
                valid_at_ms,
                valid_at_ms,
                valid_at_ms,
                any_term_query(terms),
                limit,
            ),
        ).fetchall()
        return [_indexed_doc(row) for row in rows]

    def term_doc_counts(self, scope: Scope, terms: Sequence[str]) -> dict[str, int]:
        self._enter_tenant(scope.tenant)
        if not self._snapshot:
            return postings.doc_counts(self._db, scope, terms)
        missing = [term for term in dict.fromkeys(terms) if (scope, term) not in self._docs]
        if missing:
            for term, docs in postings.doc_counts(self._db, scope, missing).items():
                self._docs[(scope, term)] = docs
        return {term: self._docs[(scope, term)] for term in terms}

    def index_stats(self, scope: Scope) -> IndexStats:
        if not self._snapshot:
            return super().index_stats(scope)
        stats = self._stats.get(scope)
        if stats is None:
            stats = self._stats[scope] = super().index_stats(scope)
        return stats

    # -- the index as the host's operations see it ------------------------------------------------
    def index_integrity_ok(self) -> bool:
        """PostgreSQL's equivalent of FTS5's integrity-check: every stored tsvector is what its tokens
        give, every row's scope lexeme names its own scope, the GIN index is valid and ready, and the
        postings and term counts are exactly what the index rows imply."""
        # Spans scopes on purpose: the check covers the whole index.
        row = self._db.execute(
            "SELECT NOT EXISTS (SELECT 1 FROM lexical_index WHERE tsv IS DISTINCT FROM engram_index_tsvector("
            " scope_token, f_primary, f_decision, f_evidence, f_context, f_citations))"
            " AND COALESCE((SELECT bool_and(i.indisvalid AND i.indisready) FROM pg_index AS i"
            " WHERE i.indrelid = 'lexical_index'::regclass), false)"
        ).fetchone()
        if not row[0]:
            return False
        tokens = self._db.execute("SELECT DISTINCT tenant, workspace, scope_token FROM lexical_index").fetchall()
        if not all(scope_token(Scope(tenant=t, workspace=w)) == token for t, w, token in tokens):
            return False
        return postings.consistent(self._db)


def _indexed_doc(row: Sequence[Any]) -> IndexedDoc:
    """(record_id, the field texts in FIELDS order, valid_from_ms, valid_to_ms) as the engine reads them."""
    return IndexedDoc(
        record_id=row[0],
        fields=dict(zip(FIELDS, row[1 : 1 + len(FIELDS)], strict=True)),
        valid_from_ms=row[-2],
        valid_to_ms=row[-1],
    )
