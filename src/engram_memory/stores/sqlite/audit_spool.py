"""Audit rows that found another process writing: written by a thread of their own, off the request path.

An audit row is a write, and a SQLite file has one write lock: a search's row waited for whatever
another `serve` process was committing (over 100,000 memories, the row's p95 went from 0.9 to 8.5 ms
while another process captured and admitted 10 pairs a second). A row that finds the lock taken is
handed here instead. The thread writes what has queued in one transaction on a connection of its own,
so its wait holds nothing the process's requests need, as soon as the lock is free. Rows still queued
when the process is killed are lost, as unsynced audit commits are at a power cut; `close` writes them.
"""

from __future__ import annotations

import logging
import queue
import sqlite3
import threading
from pathlib import Path

from engram_memory.engine.ports.rows import AuditRow
from engram_memory.stores.sqlite.queries import SQLiteTx

__all__ = ["AuditSpool"]

logger = logging.getLogger(__name__)

_STOP = None


class AuditSpool:
    """A queue of audit rows and the thread that writes them (started by the first row)."""

    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._path = path
        self._busy_timeout_ms = busy_timeout_ms
        self._queue: queue.Queue[AuditRow | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def put(self, row: AuditRow) -> None:
        with self._start:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="engram-audit-spool", daemon=True)
                self._thread.start()
        self._queue.put(row)

    def drain(self) -> None:
        """Returns once every row queued before the call was written (or given up and logged)."""
        self._queue.join()

    def close(self) -> None:
        with self._start:
            thread = self._thread
        if thread is None:
            return
        self._queue.put(_STOP)
        thread.join()

    def _run(self) -> None:
        stopping = False
        while not stopping:
            taken = [self._queue.get()]
            while True:
                try:
                    taken.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            rows = [row for row in taken if row is not None]
            stopping = len(rows) < len(taken)
            try:
                if rows:
                    self._write(rows)
            finally:
                for _ in taken:
                    self._queue.task_done()
        if self._db is not None:
            self._db.close()

    def _write(self, rows: list[AuditRow]) -> None:
        try:
            if self._db is None:
                self._db = sqlite3.connect(
                    self._path, isolation_level=None, check_same_thread=False, timeout=self._busy_timeout_ms / 1000
                )
                self._db.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
                self._db.execute("PRAGMA synchronous = NORMAL")  # as the store's own audit commits
            self._db.execute("BEGIN IMMEDIATE")
            try:
                tx = SQLiteTx(self._db)
                for row in rows:
                    tx.append_audit(row)
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as error:
            # As the engine does for a row it cannot write: logged by id, the request's answer stands.
            logger.error(
                "%d audit rows could not be written (%s), first %s",
                len(rows),
                type(error).__name__,
                rows[0].audit_id,
            )
