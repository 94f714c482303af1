"""Raw SQL on a home's store or key vault, whichever store it uses, for tests that look behind the engine.

A test reads rows (and damages them on purpose) the way any host tool would: through a connection of
its own, to the home's SQLite file or, on PostgreSQL, to its database as the owner role (which bypasses
row-level security). Statements use `?` placeholders on both; they are rewritten for psycopg here.
What differs between the two is named here once (`index_rid`, `allow_journal_edits`), so tests stay neutral.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg

from engram_memory.host.compose import store_settings
from engram_memory.host.settings import HostPaths
from engram_memory.stores.postgres.connection import psycopg_sql

SQLITE = "sqlite"
POSTGRES = "postgres"


class RawDb:
    """One autocommit connection to a store or vault database; every statement is its own transaction."""

    def __init__(self, *, sqlite_file: Path | None = None, url: str | None = None) -> None:
        self._sqlite: sqlite3.Connection | None = None
        self._pg: psycopg.Connection[tuple[Any, ...]] | None = None
        if url is not None:
            self.kind = POSTGRES
            self._pg = psycopg.connect(url, autocommit=True)
        else:
            assert sqlite_file is not None
            self.kind = SQLITE
            self._sqlite = sqlite3.connect(sqlite_file, isolation_level=None, timeout=30)

    @property
    def is_postgres(self) -> bool:
        return self.kind == POSTGRES

    @property
    def index_rid(self) -> str:
        """The column of `lexical_index` that holds the record's rid (FTS5 keeps it as the rowid)."""
        return "rid" if self.is_postgres else "rowid"

    def rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self._pg is not None:
            cursor = self._pg.execute(psycopg_sql(sql), params)
            return list(cursor.fetchall()) if cursor.description is not None else []
        assert self._sqlite is not None
        return list(self._sqlite.execute(sql, params).fetchall())

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        self.rows(sql, params)

    def one(self, sql: str, params: tuple[Any, ...] = ()) -> tuple[Any, ...] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def value(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        row = self.one(sql, params)
        assert row is not None, sql
        return row[0]

    def count(self, table: str, where: str = "", params: tuple[Any, ...] = ()) -> int:
        return int(self.value(f"SELECT count(*) FROM {table}" + (f" WHERE {where}" if where else ""), params))

    def allow_journal_edits(self) -> None:
        """Lifts the journal's append-only guard, as an attacker with the owner's rights could."""
        if self.is_postgres:
            self.execute("ALTER TABLE journal DISABLE TRIGGER journal_is_append_only")
        else:
            self.execute("DROP TRIGGER journal_is_append_only_update")
            self.execute("DROP TRIGGER journal_is_append_only_delete")

    def close(self) -> None:
        if self._pg is not None:
            self._pg.close()
        if self._sqlite is not None:
            self._sqlite.close()

    def __enter__(self) -> RawDb:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def raw_store(paths: HostPaths) -> RawDb:
    """The home's store: its SQLite file, or its PostgreSQL database as the owner."""
    settings = store_settings(paths)
    if settings.is_postgres:
        return RawDb(url=settings.store)
    return RawDb(sqlite_file=paths.sqlite_file)


def raw_vault(paths: HostPaths) -> RawDb:
    """The home's key vault: keys/vault.db, or its own PostgreSQL database as the owner."""
    settings = store_settings(paths)
    if settings.vault is not None:
        return RawDb(url=settings.vault)
    return RawDb(sqlite_file=paths.vault_file)


def store_kind(paths: HostPaths) -> str:
    """'sqlite' or 'postgres': the store the home uses."""
    return POSTGRES if store_settings(paths).is_postgres else SQLITE


def rows(paths: HostPaths, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    """Rows of one query on the home's store, on a connection opened and closed for it."""
    with raw_store(paths) as db:
        return db.rows(sql, params)


def count(paths: HostPaths, table: str, where: str = "", params: tuple[Any, ...] = ()) -> int:
    with raw_store(paths) as db:
        return db.count(table, where, params)


def readable_in_store(paths: HostPaths, needles: list[str]) -> list[str]:
    """Where any of `needles` (case-insensitive) can be read in the store at rest, as 'place: needle'.

    SQLite: every byte of every file in the store folder (main file, WAL, shared memory). PostgreSQL:
    every row of every table of the store's database, as text (bytea shows as hex, so ciphertext never
    matches); what its files still hold after an erasure is `relation_file`'s concern.
    """
    lowered = [needle.lower() for needle in needles]
    hits: list[str] = []
    if store_kind(paths) == SQLITE:
        for path in sorted(paths.store_dir.rglob("*")):
            if path.is_file():
                data = path.read_bytes().lower()
                hits.extend(f"{path.name}: {needle}" for needle in lowered if needle.encode() in data)
        return hits
    with raw_store(paths) as db:
        tables = [row[0] for row in db.rows("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
        for table in sorted(tables):
            text = "\n".join(str(row[0]) for row in db.rows(f"SELECT t::text FROM {table} AS t")).lower()
            hits.extend(f"{table}: {needle}" for needle in lowered if needle in text)
    return hits


def relation_file(paths: HostPaths, table: str) -> str:
    """The file that holds a PostgreSQL table's rows now (a rewrite such as VACUUM FULL gives it a new one)."""
    with raw_store(paths) as db:
        assert db.is_postgres
        return str(db.value("SELECT pg_relation_filepath(?::regclass)", (table,)))
