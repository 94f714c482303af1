"""Faults that cannot be caused on demand, simulated at the one seam where they happen, on either store.

SQLite: the store's `_commit`. PostgreSQL: the pooled connection the write checks out, which for one
transaction becomes a subclass whose COMMIT misbehaves (psycopg connections have no instance
attributes, and the subclass adds none, so the swap is exact and undone right after).
A lock held by another writer is real on both stores (`write_lock_held`).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import psycopg
import pytest

from engram_memory.engine.ports.store import Store
from engram_memory.host.compose import store_settings
from engram_memory.host.settings import HostPaths
from engram_memory.stores.postgres import store as postgres_store
from engram_memory.stores.postgres.connection import Connection
from engram_memory.stores.postgres.store import WRITE_LOCK, PostgresStore
from engram_memory.stores.sqlite.store import SQLiteStore

REPLY_LOST = "reply-lost"  # the commit happens, then the driver reports an error
NOT_COMMITTED = "not-committed"  # the driver reports an error and the commit did not happen


class ArmedStore(Store, Protocol):
    armed: bool


class _ArmedByOneThread:
    """Armed for the thread that armed it only: the vector indexer's own writes, on its own thread,
    must neither trip the fault meant for the call under test nor disarm it."""

    _armed_by: int | None = None

    @property
    def armed(self) -> bool:
        return self._armed_by == threading.get_ident()

    @armed.setter
    def armed(self, value: bool) -> None:
        self._armed_by = threading.get_ident() if value else None


class _SQLiteCommitFault(_ArmedByOneThread, SQLiteStore):
    fault = REPLY_LOST

    def _commit(self) -> None:
        if self.armed and self.fault == NOT_COMMITTED:
            self.armed = False
            raise sqlite3.OperationalError("disk I/O error")
        super()._commit()
        if self.armed:
            self.armed = False
            raise sqlite3.OperationalError("disk I/O error")


class _PostgresCommitFault(_ArmedByOneThread, PostgresStore):
    fault = REPLY_LOST

    def __init__(self, url: str) -> None:
        super().__init__(url, run_migrations=False)
        store = self

        class FaultyCommit(psycopg.Connection):  # type: ignore[type-arg]
            __slots__ = ()

            def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:
                if query != "COMMIT" or not store.armed:
                    return super().execute(query, *args, **kwargs)
                store.armed = False
                self.__class__ = psycopg.Connection
                if store.fault == NOT_COMMITTED:
                    psycopg.Connection.execute(self, "ROLLBACK")
                else:
                    psycopg.Connection.execute(self, "COMMIT")
                raise psycopg.OperationalError("server closed the connection unexpectedly")

        self._faulty_class = FaultyCommit
        self._faulty: Connection | None = None

    def _checkout(self) -> Connection:
        armed = self.armed
        if armed and self._faulty is not None:  # armed for a transaction that never reached its commit
            self._faulty.__class__ = psycopg.Connection
            self._faulty = None
        connection = super()._checkout()
        if armed and type(connection) is psycopg.Connection:
            connection.__class__ = self._faulty_class
            self._faulty = connection
        return connection


def commit_fault(paths: HostPaths, fault: str = REPLY_LOST) -> ArmedStore:
    """Simulated fault: the home's store (as the owner), whose next commit after `armed = True` fails."""
    settings = store_settings(paths)
    store: _SQLiteCommitFault | _PostgresCommitFault
    store = _PostgresCommitFault(settings.store) if settings.is_postgres else _SQLiteCommitFault(paths.sqlite_file)
    store.fault = fault
    return store


class _SQLiteReadsRaise(SQLiteStore):
    def read(self, *, scope=None):  # type: ignore[no-untyped-def]
        raise RuntimeError("secret internal detail /var/lib/x")


class _PostgresReadsRaise(PostgresStore):
    def read(self, *, scope=None):  # type: ignore[no-untyped-def]
        raise RuntimeError("secret internal detail /var/lib/x")


def reads_raise(paths: HostPaths) -> Store:
    """Simulated fault: every read raises an unexpected exception whose text must never reach an agent."""
    settings = store_settings(paths)
    if settings.is_postgres:
        return _PostgresReadsRaise(settings.store, run_migrations=False)
    return _SQLiteReadsRaise(paths.sqlite_file)


def impatient_store(paths: HostPaths, monkeypatch: pytest.MonkeyPatch) -> Store:
    """The home's store, waiting only 100 ms for the write lock (SQLite's busy timeout, PostgreSQL's lock_timeout)."""
    settings = store_settings(paths)
    if settings.is_postgres:
        monkeypatch.setattr(postgres_store, "LOCK_TIMEOUT", "100ms")
        return PostgresStore(settings.store, run_migrations=False)
    return SQLiteStore(paths.sqlite_file, busy_timeout_ms=100)


@contextmanager
def write_lock_held(paths: HostPaths) -> Iterator[None]:
    """Another writer holds the store's write lock for real until the block ends."""
    settings = store_settings(paths)
    if settings.is_postgres:
        with psycopg.connect(settings.store, autocommit=True) as other:
            other.execute("BEGIN")
            other.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            try:
                yield
            finally:
                other.execute("ROLLBACK")
        return
    other = sqlite3.connect(paths.sqlite_file, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()
