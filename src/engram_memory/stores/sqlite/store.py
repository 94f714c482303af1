"""The embedded store: one SQLite file in WAL mode, `BEGIN IMMEDIATE` for every write.

Driver errors are translated here, at the transaction boundary: a failure before COMMIT is
STORE_UNAVAILABLE (nothing was written), a failure of COMMIT itself is MUTATION_OUTCOME_UNKNOWN
(the caller resolves it by retrying with the same idempotency key).
"""

from __future__ import annotations

import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.stores.sqlite.queries import SQLiteTx

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000


def _migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every bundled migration, in order."""
    found = []
    for entry in resources.files("engram_memory.stores.sqlite").joinpath("migrations").iterdir():
        if entry.name.endswith(".sql"):
            version = int(entry.name.split("_", 1)[0])
            found.append((version, entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


class SQLiteStore:
    """Thread-safe by one lock per store object; several processes share the file through WAL."""

    index_name = "sqlite-fts5"

    def __init__(self, path: Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._erasure_pending = False
        try:
            self._db = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
            )
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")
            self._db.execute("PRAGMA secure_delete = ON")
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            self._migrate()
        except sqlite3.Error as exc:
            raise ContractError(ErrorCode.STORE_UNAVAILABLE) from exc

    def _migrate(self) -> None:
        """Applies bundled migrations in order and checks the ledger of those already applied."""
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                " digest TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
            )
            applied = {
                row[0]: (row[1], row[2]) for row in db.execute("SELECT version, name, digest FROM schema_migrations")
            }
            for version, name, sql in _migrations():
                checksum = "sha256:" + hashlib.sha256(sql.encode("utf-8")).hexdigest()
                if version in applied:
                    if applied[version] != (name, checksum):
                        raise ContractError(ErrorCode.MIGRATION_LEDGER_INVALID)
                    continue
                for statement in _statements(sql):
                    db.execute(statement)
                db.execute(
                    "INSERT INTO schema_migrations (version, name, digest, applied_at_ms) VALUES (?, ?, ?, ?)",
                    (version, name, checksum, time.time_ns() // 1_000_000),
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _commit(self) -> None:
        self._db.execute("COMMIT")

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[SQLiteTx]:
        """Begins; a failure inside rolls back, and a driver error becomes STORE_UNAVAILABLE."""
        try:
            self._db.execute(begin)
        except sqlite3.Error as exc:
            raise ContractError(ErrorCode.STORE_UNAVAILABLE) from exc
        try:
            yield SQLiteTx(self._db)
        except sqlite3.Error as exc:
            self._rollback()
            logger.error("transaction failed before commit: %s", type(exc).__name__)
            raise ContractError(ErrorCode.STORE_UNAVAILABLE) from exc
        except BaseException:
            self._rollback()
            raise

    @contextmanager
    def write(self) -> Iterator[SQLiteTx]:
        with self._lock:
            with self._transaction("BEGIN IMMEDIATE") as tx:
                yield tx
            try:
                self._commit()
            except sqlite3.Error as exc:
                self._rollback()
                logger.error("commit failed: %s", type(exc).__name__)
                raise ContractError(ErrorCode.MUTATION_OUTCOME_UNKNOWN) from exc
            if self._erasure_pending:
                self.erase_physically()

    @contextmanager
    def read(self) -> Iterator[SQLiteTx]:
        with self._lock:
            with self._transaction("BEGIN") as tx:
                yield tx
            self._rollback()

    def _rollback(self) -> None:
        if self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                logger.error("rollback failed")

    def erase_physically(self) -> bool:
        """Copies the WAL into the (secure-deleting) main file and truncates it to zero bytes."""
        with self._lock:
            try:
                row = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            except sqlite3.Error:
                row = None
            # Another process's open snapshot can hold the checkpoint back: retry after later writes.
            self._erasure_pending = row is None or row[0] != 0
            return not self._erasure_pending

    def holds_data(self) -> bool:
        """Whether any scope has a journal: such a store must never get fresh keys."""
        with self.read() as tx:
            return tx.any_journal()

    def close(self) -> None:
        with self._lock:
            if self._erasure_pending:
                self.erase_physically()
            self._db.close()


def _statements(sql: str) -> Iterator[str]:
    """Splits a migration into complete statements (triggers contain semicolons)."""
    buffer = ""
    for line in sql.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            statement = buffer.strip()
            if statement:
                yield statement
            buffer = ""
    if buffer.strip():
        yield buffer.strip()
