"""Whole-store reads for the host's backup and restore, and the strip of derived index text from a copy.

These statements span every scope on purpose: a backup copies, and a restore checks, the store as a
whole. They run on the host path only, never for an agent call.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence

from engram_memory.engine.ports.lexical import FIELDS
from engram_memory.engine.ports.store import Scope, ScopeHead
from engram_memory.stores.sqlite.queries import SQLiteTx

# The full-text index and its shadow tables, and the embeddings: derived from plaintext, so never
# archived nor counted (a restore rebuilds both).
INDEX_TABLE = "lexical_index"
VECTOR_TABLE = "record_vectors"
# The impact-ordered postings beside the index (stores/sqlite/postings.py): tokens too, never archived.
POSTINGS_TABLES = (f"{INDEX_TABLE}_postings", f"{INDEX_TABLE}_terms")
_LEN_COLUMNS = tuple(f"len_{name}" for name in FIELDS)


class SnapshotQueries:
    """Reads over one open transaction of a store (or its in-memory copy)."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._db = connection

    @property
    def tx(self) -> SQLiteTx:
        """The same transaction through the engine's port (journal events, index statistics)."""
        return SQLiteTx(self._db)

    def integrity_ok(self) -> bool:
        return [tuple(row) for row in self._db.execute("PRAGMA quick_check").fetchall()] == [("ok",)]

    def schema_ledger(self) -> list[tuple[int, str, str]]:
        rows = self._db.execute("SELECT version, name, digest FROM schema_migrations ORDER BY version").fetchall()
        return [(int(row[0]), str(row[1]), str(row[2])) for row in rows]

    def scope_heads(self) -> list[tuple[Scope, ScopeHead]]:
        # Spans scopes: the backup manifest names the head of every scope's journal.
        rows = self._db.execute(
            "SELECT tenant, workspace, head_cursor, head_digest, records_cursor FROM scopes ORDER BY tenant, workspace"
        ).fetchall()
        return [
            (Scope(tenant=row[0], workspace=row[1]), ScopeHead(cursor=row[2], digest=row[3], records_cursor=row[4]))
            for row in rows
        ]

    def record_digests(self) -> list[tuple[str, str, str]]:
        """(record_id, state, payload_digest) of every record, by record id: what the record root covers."""
        # Spans scopes: record ids are unique across the store, and the root covers them all.
        rows = self._db.execute("SELECT record_id, state, payload_digest FROM records ORDER BY record_id").fetchall()
        return [(str(row[0]), str(row[1]), str(row[2])) for row in rows]

    def table_counts(self) -> dict[str, int]:
        """Rows per table, the derived full-text index excluded (a restore rebuilds it)."""
        names = [
            str(row[0])
            for row in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
            if not str(row[0]).startswith(INDEX_TABLE) and str(row[0]) != VECTOR_TABLE
        ]
        counts = {}
        for name in names:
            quoted = '"' + name.replace('"', '""') + '"'
            counts[name] = int(self._db.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0])  # noqa: S608
        return counts

    def holds_rows(self) -> bool:
        """Whether any table but the migration ledger has a row: only an empty store may be restored into."""
        return any(count for name, count in self.table_counts().items() if name != "schema_migrations")

    def candidate_states(self, scope: Scope) -> dict[str, str]:
        rows = self._db.execute(
            "SELECT candidate_id, state FROM candidates WHERE tenant = ? AND workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchall()
        return {str(row[0]): str(row[1]) for row in rows}

    def record_states(self, scope: Scope) -> dict[str, str]:
        rows = self._db.execute(
            "SELECT record_id, state FROM records WHERE tenant = ? AND workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchall()
        return {str(row[0]): str(row[1]) for row in rows}

    def indexed_count(self, scope: Scope) -> int:
        """Records of the scope present in the full-text index (joined through the records table)."""
        row = self._db.execute(
            f"SELECT count(*) FROM {INDEX_TABLE} AS f JOIN records AS r ON r.rid = f.rowid"  # noqa: S608
            " WHERE r.tenant = ? AND r.workspace = ?",
            (scope.tenant, scope.workspace),
        ).fetchone()
        return int(row[0])

    def index_rows(self) -> int:
        # Spans scopes: the strip empties the whole index.
        return int(self._db.execute(f"SELECT count(*) FROM {INDEX_TABLE}").fetchone()[0])  # noqa: S608

    def strip_derived_index(self) -> None:
        """Empties the full-text index and its statistics (run inside a write transaction of a copy).

        The index holds tokens of plaintext, which no data key covers: a backup must not carry them.
        The 'optimize' merge drops the deleted tokens from the index segments, and the copy is then
        vacuumed so no freed page keeps them either.
        """
        # Spans scopes: the whole index of the copy goes, every scope's statistics with it.
        self._db.execute(f"DELETE FROM {INDEX_TABLE}")  # noqa: S608
        for table in POSTINGS_TABLES:
            self._db.execute(f"DELETE FROM {table}")  # noqa: S608
        self._db.execute(f"DELETE FROM {VECTOR_TABLE}")  # noqa: S608
        self._db.execute(f"INSERT INTO {INDEX_TABLE} ({INDEX_TABLE}) VALUES ('optimize')")  # noqa: S608
        zeroes = ", ".join(f"{column} = 0" for column in ("doc_count", *_LEN_COLUMNS))
        self._db.execute(f"UPDATE scopes SET {zeroes}")  # noqa: S608

    # -- moving a store between SQLite and PostgreSQL (backup and restore of a PostgreSQL home) ----------
    def columns(self, table: str) -> list[str]:
        return [str(row[1]) for row in self._db.execute("SELECT * FROM pragma_table_info(?)", (table,))]

    def rows(self, table: str, columns: Sequence[str]) -> Iterator[tuple[object, ...]]:
        """Every row of `table` (a name the caller takes from its own constants)."""
        names = ", ".join(_quoted(column) for column in columns)
        for row in self._db.execute(f"SELECT {names} FROM {_quoted(table)}"):  # noqa: S608
            yield tuple(row)

    def insert_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
        names = ", ".join(_quoted(column) for column in columns)
        marks = ", ".join("?" for _ in columns)
        self._db.executemany(f"INSERT INTO {_quoted(table)} ({names}) VALUES ({marks})", rows)  # noqa: S608

    def vector_rows(self) -> list[tuple[object, ...]]:
        """Every embedding row (rid, tenant, workspace, model, vector, subject), for a restore into another store."""
        # Spans scopes: the whole semantic index moves.
        sql = f"SELECT rid, tenant, workspace, model, vector, subject FROM {VECTOR_TABLE}"  # noqa: S608
        return [tuple(row) for row in self._db.execute(sql)]

    def indexed_fields(self) -> list[tuple[int, Scope, tuple[str, ...]]]:
        """(rid, scope, field texts) of every index row, for a restore into another store's index."""
        # Spans scopes: the whole index moves.
        names = ", ".join(f"f.f_{name}" for name in FIELDS)
        rows = self._db.execute(
            f"SELECT f.rowid, r.tenant, r.workspace, {names} FROM {INDEX_TABLE} AS f"  # noqa: S608
            " JOIN records AS r ON r.rid = f.rowid ORDER BY f.rowid"
        ).fetchall()
        return [(int(row[0]), Scope(row[1], row[2]), tuple(str(v) for v in row[3:])) for row in rows]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
