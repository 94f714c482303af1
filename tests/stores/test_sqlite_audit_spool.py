"""Audit rows that find another process writing go to the store's spool (stores/sqlite/audit_spool.py):
the caller does not wait for the other writer, and the row is written once the lock is free."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from engram_memory.stores.sqlite.audit_spool import AuditSpool
from engram_memory.stores.sqlite.store import SQLiteStore
from tests.stores.builders import AT_MS, audit

JOIN_S = 60  # a call that blocked on the other writer would never return while the lock is held


def _audit_ids(path: Path) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[0] for row in db.execute("SELECT audit_id FROM audit_log ORDER BY audit_id")]


@contextmanager
def _other_writer(path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection holding the file's write lock, as another `serve` process mid-transaction."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield other
    finally:
        if other.in_transaction:
            other.execute("COMMIT")
        other.close()


def _append_in_thread(store: SQLiteStore, audit_id: str) -> None:
    caller = threading.Thread(target=store.append_audit, args=(audit(audit_id, AT_MS),))
    caller.start()
    caller.join(JOIN_S)
    assert not caller.is_alive(), "append_audit waited for the other writer"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(tmp_path / "s.db")
    yield opened
    opened.close()


def test_an_uncontended_audit_row_is_written_before_the_call_returns(store: SQLiteStore) -> None:
    store.append_audit(audit("aud_now", AT_MS))
    assert _audit_ids(store.path) == ["aud_now"]


def test_a_row_that_finds_the_lock_taken_returns_at_once_and_is_written_after(store: SQLiteStore) -> None:
    with _other_writer(store.path):
        _append_in_thread(store, "aud_spooled")
        assert _audit_ids(store.path) == []
    store.drain_audit()
    assert _audit_ids(store.path) == ["aud_spooled"]
    store.append_audit(audit("aud_after", AT_MS))  # the lock free again: written in the call
    assert _audit_ids(store.path) == ["aud_after", "aud_spooled"]


def test_the_store_s_own_work_goes_on_while_a_spooled_row_waits(store: SQLiteStore) -> None:
    with _other_writer(store.path):
        _append_in_thread(store, "aud_waiting")
        with store.read() as tx:  # the spool's wait holds nothing the process's reads need
            assert list(tx.audit_rows(None, None)) == []
    store.drain_audit()
    assert _audit_ids(store.path) == ["aud_waiting"]


def test_close_writes_what_is_still_queued(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    with _other_writer(path):
        _append_in_thread(store, "aud_a")
        _append_in_thread(store, "aud_b")
    store.close()
    assert _audit_ids(path) == ["aud_a", "aud_b"]


def test_a_row_the_spool_cannot_write_in_time_is_logged_by_id_and_the_spool_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.db"
    SQLiteStore(path).close()
    spool = AuditSpool(path, busy_timeout_ms=50)
    try:
        with caplog.at_level(logging.ERROR), _other_writer(path):
            spool.put(audit("aud_lost", AT_MS))
            spool.drain()  # the spool waited its 50 ms busy timeout, then gave the row up
        assert _audit_ids(path) == []
        assert any("aud_lost" in record.getMessage() for record in caplog.records)
        spool.put(audit("aud_kept", AT_MS))
        spool.drain()
        assert _audit_ids(path) == ["aud_kept"]
    finally:
        spool.close()
