"""The embedded store's transaction: the shared statements (stores/sql) plus its FTS5 full-text index.

FTS5 keeps every scope's rows in one index; a scope token in its own column confines each match to
one scope, and bm25() orders the candidate pool the engine then re-scores with BM25F.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any

from engram_memory.engine.ports.faults import StoreFault
from engram_memory.engine.ports.lexical import FIELD_WEIGHTS, FIELDS
from engram_memory.engine.ports.store import IndexedDoc, Scope
from engram_memory.stores.sql.base import StoreInvariantError
from engram_memory.stores.sql.queries.index_reads import FIELD_COLUMNS
from engram_memory.stores.sql.queries.transaction import SqlTx
from engram_memory.stores.sqlite import postings
from engram_memory.stores.sqlite.faults import sqlite_fault

_CONTENT_FILTER = "{" + " ".join(FIELD_COLUMNS) + "}"
_BM25_WEIGHTS = ", ".join(["0.0", *(repr(FIELD_WEIGHTS[name]) for name in FIELDS)])


def scope_token(scope: Scope) -> str:
    """The token that confines a full-text match to one scope inside the shared full-text index."""
    return "s" + hashlib.sha256(scope.ref.encode("utf-8")).hexdigest()[:40]


def _phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def _match_expression(scope: Scope, terms: Sequence[str]) -> str:
    alternatives = " OR ".join(_phrase(term) for term in terms)
    return f"scope : {_phrase(scope_token(scope))} AND {_CONTENT_FILTER} : ({alternatives})"


def _indexed_doc(row: Sequence[Any]) -> IndexedDoc:
    """(record_id, the field texts in FIELDS order, valid_from_ms, valid_to_ms)."""
    return IndexedDoc(
        record_id=row[0],
        fields=dict(zip(FIELDS, row[1 : 1 + len(FIELDS)], strict=True)),
        valid_from_ms=row[-2],
        valid_to_ms=row[-1],
    )


class SQLiteTx(SqlTx):
    """One open transaction on the connection; the store begins and ends it. Inside a batch, `pending`
    holds the batch's postings until its end (postings.PendingPostings)."""

    _db: sqlite3.Connection
    # Unary + keeps SQLite from serving `tenant = ? AND workspace = ?` from records_by_digest's prefix:
    # without statistics it chose that over record_id's unique index, and read every record of the
    # scope for each page of hits (search p95 6.7 ms -> 129 ms at 100,000 memories).
    _SCOPE_OF_IDS = "+tenant = ? AND +workspace = ?"

    def __init__(self, connection: sqlite3.Connection, pending: postings.PendingPostings | None = None) -> None:
        super().__init__(connection)
        self._pending = pending

    def _settled(self) -> sqlite3.Connection:
        """The connection, with any pending postings written first, for a read of the postings."""
        if self._pending is not None:
            self._pending.flush(self._db)
        return self._db

    # -- lexical index ---------------------------------------------------------------------
    def index_record(self, scope: Scope, record_id: str, fields: Mapping[str, str], *, tokenizer: str) -> None:
        rid = self._rid(scope, record_id)
        if rid is None:
            raise StoreInvariantError("indexing a record that does not exist")
        values = self._insert_entry(scope, rid, fields)
        self._shift_stats(scope, 1, [len(value.split()) for value in values], tokenizer)

    def unindex_record(self, scope: Scope, record_id: str) -> bool:
        rid = self._rid(scope, record_id)
        if rid is None:
            return False
        self._drop_vector(scope, rid)
        old = self._delete_entry(scope, rid)
        if old is None:
            return False
        self._shift_stats(scope, -1, [-len(value.split()) for value in old])
        return True

    def reindex_record(self, scope: Scope, record_id: str, fields: Mapping[str, str]) -> bool:
        rid = self._rid(scope, record_id)
        if rid is None:
            return False
        row = self._db.execute(
            f"SELECT {', '.join(FIELD_COLUMNS)} FROM lexical_index WHERE rowid = ?",  # noqa: S608
            (rid,),
        ).fetchone()
        if row is None or [str(value or "") for value in row] == [fields.get(name, "") for name in FIELDS]:
            return False
        old = self._delete_entry(scope, rid) or []
        new = self._insert_entry(scope, rid, fields)
        self._shift_stats(scope, 0, [len(b.split()) - len(a.split()) for a, b in zip(old, new, strict=True)])
        return True

    def _insert_entry(self, scope: Scope, rid: int, fields: Mapping[str, str]) -> list[str]:
        """The FTS5 row and its postings; returns the field texts in FIELDS order."""
        values = [fields.get(name, "") for name in FIELDS]
        self._db.execute(
            f"INSERT INTO lexical_index (rowid, scope, {', '.join(FIELD_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?, ?)",  # noqa: S608
            (rid, scope_token(scope), *values),
        )
        fields_of = dict(zip(FIELDS, values, strict=True))
        if self._pending is not None:
            self._pending.add(scope, rid, fields_of)
        else:
            postings.add(self._db, scope, rid, fields_of)
        return values

    def _delete_entry(self, scope: Scope, rid: int) -> list[str] | None:
        """Deletes the FTS5 row and its postings; returns its field texts, or None when there was none."""
        row = self._db.execute(
            f"SELECT {', '.join(FIELD_COLUMNS)} FROM lexical_index WHERE rowid = ?",  # noqa: S608
            (rid,),
        ).fetchone()
        if row is None:
            return None
        values = [str(value or "") for value in row]
        self._db.execute("DELETE FROM lexical_index WHERE rowid = ?", (rid,))
        if self._pending is None or not self._pending.cancel(rid):
            postings.drop(self._db, scope, rid, dict(zip(FIELDS, values, strict=True)))
        return values

    def purge_index(self) -> None:
        # Deleted FTS5 tokens linger in old segments until they are merged away.
        self._db.execute("INSERT INTO lexical_index (lexical_index) VALUES ('optimize')")

    def lexical_candidates(
        self, scope: Scope, terms: Sequence[str], *, valid_at_ms: int, limit: int
    ) -> list[IndexedDoc]:
        if not terms:
            return []
        # The postings give the likely best rowids first (postings.py), from the terms that have postings
        # (a stop word among other words only adds to the scores); records and field texts are read
        # for those few. Index rows are exactly the scope's accepted_current records, so only validity
        # and expiry can drop one: when they drop so many that fewer than `limit` remain of a full
        # batch, FTS5 filters the whole match set instead.
        batch = limit + 32
        posted = postings.posted(terms)
        if not posted:
            return self._fts_candidates(scope, terms, valid_at_ms, limit)
        doc_count = self.index_stats(scope).doc_count
        top = postings.best(self._settled(), scope, posted, doc_count, batch)
        if not top:
            return []
        rows = self._eligible_rows(scope, top, valid_at_ms)
        if len(rows) < limit and len(top) == batch:
            return self._all_candidates(scope, _match_expression(scope, terms), valid_at_ms, limit)
        order = {rid: position for position, rid in enumerate(top)}
        rows.sort(key=lambda row: order[int(row[0])])
        return [_indexed_doc(row[1:]) for row in rows[:limit]]

    def _fts_candidates(self, scope: Scope, terms: Sequence[str], valid_at_ms: int, limit: int) -> list[IndexedDoc]:
        """FTS5 ranks every match of the scope (rowid and score only), then records are read for the best."""
        match = _match_expression(scope, terms)
        batch = limit + 32
        top = self._db.execute(
            f"SELECT rowid, bm25(lexical_index, {_BM25_WEIGHTS}) FROM lexical_index"  # noqa: S608
            " WHERE lexical_index MATCH ? ORDER BY 2 LIMIT ?",
            (match, batch),
        ).fetchall()
        if not top:
            return []
        rows = self._eligible_rows(scope, [int(row[0]) for row in top], valid_at_ms)
        if len(rows) < limit and len(top) == batch:
            return self._all_candidates(scope, match, valid_at_ms, limit)
        score = {int(row[0]): float(row[1]) for row in top}
        rows.sort(key=lambda row: (score[int(row[0])], row[1]))
        return [_indexed_doc(row[1:]) for row in rows[:limit]]

    def _eligible_rows(self, scope: Scope, rids: Sequence[int], valid_at_ms: int) -> list[tuple[Any, ...]]:
        return list(
            self._db.execute(
                f"SELECT r.rid, r.record_id, {', '.join('f.' + c for c in FIELD_COLUMNS)},"  # noqa: S608
                " r.valid_from_ms, r.valid_to_ms"
                # CROSS JOIN keeps this order: each ranked rowid looked up, never a scan of the scope.
                " FROM json_each(?) AS ranked CROSS JOIN records AS r ON r.rid = ranked.value"
                " CROSS JOIN lexical_index AS f ON f.rowid = r.rid"
                " WHERE r.tenant = ? AND r.workspace = ? AND r.state = 'accepted_current'"
                " AND r.valid_from_ms <= ? AND (r.valid_to_ms IS NULL OR r.valid_to_ms >= ?)"
                " AND (r.expires_at_ms IS NULL OR r.expires_at_ms > ?)",
                (json.dumps(list(rids)), scope.tenant, scope.workspace, valid_at_ms, valid_at_ms, valid_at_ms),
            ).fetchall()
        )

    def _all_candidates(self, scope: Scope, match: str, valid_at_ms: int, limit: int) -> list[IndexedDoc]:
        rows = self._db.execute(
            f"SELECT r.record_id, {', '.join('f.' + c for c in FIELD_COLUMNS)}, r.valid_from_ms, r.valid_to_ms"  # noqa: S608
            " FROM lexical_index AS f JOIN records AS r ON r.rid = f.rowid"
            " WHERE lexical_index MATCH ? AND r.tenant = ? AND r.workspace = ? AND r.state = 'accepted_current'"
            " AND r.valid_from_ms <= ? AND (r.valid_to_ms IS NULL OR r.valid_to_ms >= ?)"
            " AND (r.expires_at_ms IS NULL OR r.expires_at_ms > ?)"
            f" ORDER BY bm25(lexical_index, {_BM25_WEIGHTS}), r.record_id LIMIT ?",
            (match, scope.tenant, scope.workspace, valid_at_ms, valid_at_ms, valid_at_ms, limit),
        ).fetchall()
        return [_indexed_doc(row) for row in rows]

    def term_doc_counts(self, scope: Scope, terms: Sequence[str]) -> dict[str, int]:
        return postings.doc_counts(self._settled(), scope, terms)

    # -- the index as the host's operations see it ------------------------------------------------
    _INDEX_KEY = "rowid"

    def _index_scope(self, scope: Scope) -> tuple[str, Sequence[Any]]:
        return "lexical_index MATCH ?", ('scope : "' + scope_token(scope) + '"',)

    def index_integrity_ok(self) -> bool:
        """FTS5's own check, then the postings and term counts against the FTS5 rows."""
        try:
            self._db.execute("INSERT INTO lexical_index (lexical_index) VALUES ('integrity-check')")
        except sqlite3.DatabaseError as exc:
            if sqlite_fault(exc) is StoreFault.CORRUPT:  # FTS5 answers a failed check with SQLITE_CORRUPT_VTAB
                return False
            raise
        return postings.consistent(self._settled())
