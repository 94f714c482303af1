"""Whole-store reads and writes of a PostgreSQL store for the host's backup and restore (owner role only).

A backup copies these tables into the same SQLite snapshot an embedded store's backup holds, so one
archive format serves both stores and either can restore the other's archive. The full-text index is
never archived (its tokens are plaintext no key covers); a restore loads the index its own checks rebuilt.
These statements span every scope on purpose: a backup copies, and a restore fills, the store as a whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from types import MappingProxyType

from engram_memory.engine.ports.lexical import FIELDS
from engram_memory.engine.ports.store import Scope, ScopeHead
from engram_memory.stores.postgres import postings
from engram_memory.stores.postgres.connection import PsycopgConnection
from engram_memory.stores.postgres.lexemes import index_tsvector, scope_token

# What an archive holds, in an order that respects every reference; the ledger is each store's own.
ARCHIVED_TABLES = (
    "scopes",
    "journal",
    "candidates",
    "records",
    "sealed_bodies",
    "tombstones",
    "record_families",
    "idempotency",
    "confirmations",
    "audit_log",
)
_ORDER = MappingProxyType(
    {"journal": "tenant, workspace, cursor", "records": "rid", "audit_log": "seq", "scopes": "tenant, workspace"}
)
_IDENTITIES = (("records", "rid"), ("audit_log", "seq"))


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _table(name: str) -> str:
    if name not in ARCHIVED_TABLES:
        raise ValueError(f"not an archived table: {name}")
    return _quoted(name)


class PostgresSnapshot:
    """Reads and writes over one open transaction of the store (read-only for a backup)."""

    def __init__(self, db: PsycopgConnection) -> None:
        self._db = db

    def rows(self, table: str, columns: Sequence[str]) -> Iterator[tuple[object, ...]]:
        names = ", ".join(_quoted(column) for column in columns)
        order = _ORDER.get(table, "1")
        for row in self._db.raw.execute(f"SELECT {names} FROM {_table(table)} ORDER BY {order}"):  # noqa: S608
            yield tuple(row)

    def insert_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
        names = ", ".join(_quoted(column) for column in columns)
        marks = ", ".join("%s" for _ in columns)
        with self._db.raw.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {_table(table)} ({names}) VALUES ({marks})", list(rows))  # noqa: S608

    def insert_index(self, rows: Iterable[tuple[int, Scope, tuple[str, ...]]]) -> None:
        """The index rows and their postings."""
        names = ", ".join(f"f_{name}" for name in FIELDS)
        loaded = list(rows)
        with self._db.raw.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO lexical_index (rid, tenant, workspace, scope_token, {names}, tsv)"  # noqa: S608
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::tsvector)",
                [
                    (rid, scope.tenant, scope.workspace, scope_token(scope), *texts, _tsv(scope, texts))
                    for rid, scope, texts in loaded
                ],
            )
        for rid, scope, texts in loaded:
            postings.add(self._db, scope, rid, dict(zip(FIELDS, texts, strict=True)))

    def insert_vectors(self, rows: Iterable[tuple[object, ...]]) -> None:
        with self._db.raw.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO record_vectors (rid, tenant, workspace, model, vector, subject)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                [tuple(row) for row in rows],
            )

    def continue_identities(self) -> None:
        """Identity columns go on after the highest value loaded, so new rows never collide with restored ones."""
        for table, column in _IDENTITIES:
            self._db.raw.execute(
                f"SELECT setval(pg_get_serial_sequence('{table}', '{column}'),"  # noqa: S608
                f" COALESCE((SELECT max({column}) FROM {table}), 0) + 1, false)"
            )

    # -- what a manifest states (host/recovery/backup.py store_facts) --------------------------------------------
    def schema_ledger(self) -> list[tuple[int, str, str]]:
        rows = self._db.execute("SELECT version, name, digest FROM schema_migrations ORDER BY version").fetchall()
        return [(int(row[0]), str(row[1]), str(row[2])) for row in rows]

    def scope_heads(self) -> list[tuple[Scope, ScopeHead]]:
        rows = self._db.execute(
            "SELECT tenant, workspace, head_cursor, head_digest, records_cursor FROM scopes ORDER BY tenant, workspace"
        ).fetchall()
        return [(Scope(row[0], row[1]), ScopeHead(row[2], row[3], row[4])) for row in rows]

    def record_digests(self) -> list[tuple[str, str, str]]:
        rows = self._db.execute("SELECT record_id, state, payload_digest FROM records ORDER BY record_id").fetchall()
        return [(str(row[0]), str(row[1]), str(row[2])) for row in rows]

    def table_counts(self) -> dict[str, int]:
        """Rows per archived table (named as in the archive; the derived index excluded)."""
        return {
            name: int(self._db.raw.execute(f"SELECT count(*) FROM {_table(name)}").fetchone()[0])  # type: ignore[index]  # noqa: S608
            for name in sorted(ARCHIVED_TABLES)
        }

    def holds_rows(self) -> bool:
        """Whether any table but the ledger has a row: only an empty store may be restored into."""
        index = self._db.execute("SELECT EXISTS (SELECT 1 FROM lexical_index)").fetchone()[0]
        return bool(index) or any(self.table_counts().values())


def _tsv(scope: Scope, texts: tuple[str, ...]) -> str:
    return index_tsvector(scope_token(scope), texts)
