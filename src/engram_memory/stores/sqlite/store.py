"""The embedded store: one SQLite file in WAL mode, `BEGIN IMMEDIATE` for every write.

Driver errors are translated here, at the transaction boundary (through `SQLITE`, which names the
fault from SQLite's result code): a failure before COMMIT is STORE_UNAVAILABLE (nothing was written),
a failure of COMMIT itself is MUTATION_OUTCOME_UNKNOWN (the caller resolves it by retrying with the
same idempotency key).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from engram_memory.contract.errors import ErrorCode
from engram_memory.engine.ports.rows import AuditRow, Scope
from engram_memory.stores.sql.connection import StatementTracer
from engram_memory.stores.sqlite import postings
from engram_memory.stores.sqlite.audit_spool import AuditSpool
from engram_memory.stores.sqlite.faults import SQLITE
from engram_memory.stores.sqlite.migrate import migrate
from engram_memory.stores.sqlite.queries import SQLiteTx
from engram_memory.stores.sqlite.snapshot import SnapshotQueries

logger = logging.getLogger(__name__)

BUSY_TIMEOUT_MS = 10_000
# SQLite's default page cache is 2 MiB; the index b-trees of a large store are read and written all over,
# and 64 MiB keeps their inner pages in memory (docs/benchmarks.md, speed at scale).
CACHE_KIB = 65_536
# A checkpoint copies the WAL's pages back into a file of hundreds of megabytes, at random offsets, and
# syncs it. SQLite's default starts one every 1,000 pages (a few single writes at 100,000 memories);
# at 16,000 the hot pages (term counts, the journal's tail, FTS5's structure) are copied once for many
# commits: MCP write throughput at 100,000 memories +15 %. The WAL file keeps up to 64 MB; an erasure
# still truncates it at once.
WAL_AUTOCHECKPOINT_PAGES = 16_000
# sqlite3 opens this name as a private database in memory (a backup's or a restore's working copy).
IN_MEMORY = Path(":memory:")
# How often a writer asks again for the write lock another process holds (SQLiteStore._begin_immediate).
BEGIN_POLL_MIN_S = 0.0002
BEGIN_POLL_MAX_S = 0.002
# Bytes 18 and 19 of a database file say "WAL" (2) or "rollback journal" (1); an image in memory must say 1.
_FILE_FORMAT_BYTES = slice(18, 20)


class SQLiteStore:
    """Thread-safe by one lock per store object; several processes share the file through WAL."""

    index_name = "sqlite-fts5"

    def __init__(
        self,
        path: Path,
        *,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        image: bytes | None = None,
        run_migrations: bool = True,
        tracer: StatementTracer | None = None,
    ) -> None:
        """`image` (with `path` IN_MEMORY) loads a database file's bytes; `run_migrations=False` lets a
        restore check an archived store exactly as it was written before migrating it. `tracer` sees
        every statement run once the store is open (sqlite3's trace callback, which ignores what it raises)."""
        self.path = path
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._lock = threading.RLock()
        self._erasure_pending = False
        self._batching = False
        self._pending = postings.PendingPostings()
        self._batch_torn = False
        # No other connection can hold an in-memory store's write lock.
        self._spool = None if path == IN_MEMORY else AuditSpool(path, self._busy_timeout_ms)
        with SQLITE.translated():
            self._db = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
            )
            if image is not None:
                self._db.deserialize(_rollback_journal_image(image))
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")
            self._db.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
            self._db.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT_PAGES}")
            self._db.execute("PRAGMA secure_delete = ON")
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            if run_migrations:
                self._migrate()
            self._db.set_trace_callback(tracer)

    def _migrate(self) -> None:
        migrate(self._db, "migrations")
        self._backfill_postings()

    def _backfill_postings(self) -> None:
        """A store indexed before schema 4 has index rows without postings: derive them once, atomically."""
        if (
            self._db.execute("SELECT 1 FROM lexical_index_terms LIMIT 1").fetchone() is not None
            or self._db.execute("SELECT 1 FROM lexical_index LIMIT 1").fetchone() is None
        ):
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            rows = self._db.execute(postings.INDEX_ROWS).fetchall()
            written = postings.backfill(self._db, rows)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        if written:
            logger.info("derived the impact-ordered postings of %d indexed records", written)

    def _commit(self) -> None:
        self._db.execute("COMMIT")

    def _begin_immediate(self, *, wait: bool = True) -> None:
        """BEGIN IMMEDIATE, tried again every few tenths of a millisecond while another process writes
        (or, with `wait` false, tried once: _WriteLockTaken when another connection holds the lock).

        SQLite's own busy handler sleeps 1, 2, 5, 10, 15, 20, 25… ms between tries, so a write that finds
        another process's transaction (a few ms with its sync) waited out the next step of that ladder:
        18 ms for a lock held 10 ms. That was most of a search's tail while another `serve` process wrote
        (its audit row is a write). Here the handler is off for this one statement, and the wait is the
        other writer's transaction plus at most BEGIN_POLL_MAX_S, until the busy timeout.
        """
        self._db.execute("PRAGMA busy_timeout = 0")
        try:
            deadline = time.monotonic() + self._busy_timeout_ms / 1000
            pause = BEGIN_POLL_MIN_S
            while True:
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as error:
                    if error.sqlite_errorcode == sqlite3.SQLITE_BUSY and not wait:
                        raise _WriteLockTaken from None
                    if error.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                        raise
                time.sleep(pause)
                pause = min(2 * pause, BEGIN_POLL_MAX_S)
        finally:
            self._db.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")

    @contextmanager
    def _transaction(self, begin: str, *, wait: bool = True) -> Iterator[SQLiteTx]:
        """Begins; a failure inside rolls back, and a driver error becomes STORE_UNAVAILABLE."""
        with SQLITE.translated():  # BEGIN IMMEDIATE that waited out the busy timeout: STORE_UNAVAILABLE, busy
            if begin == "BEGIN IMMEDIATE":
                self._begin_immediate(wait=wait)
            else:
                self._db.execute(begin)
        try:
            with SQLITE.translated(failed="transaction failed before commit"):
                yield SQLiteTx(self._db)
        except BaseException:
            self._rollback()
            raise

    @contextmanager
    def write(self, *, synced: bool = True, scopes: Collection[Scope] | None = None) -> Iterator[SQLiteTx]:
        """Every writer of the file queues on BEGIN IMMEDIATE, whatever its `scopes`."""
        with self._writing(synced=synced) as tx:
            yield tx

    @contextmanager
    def _writing(self, *, synced: bool, wait: bool = True) -> Iterator[SQLiteTx]:
        with self._lock:
            if self._batching:
                with self._savepoint() as tx:
                    yield tx
                return
            if not synced:
                self._synchronous("NORMAL")
            try:
                with self._transaction("BEGIN IMMEDIATE", wait=wait) as tx:
                    yield tx
                # The COMMIT may have reached the disk before it failed: the outcome is unknown.
                with SQLITE.translated(ErrorCode.MUTATION_OUTCOME_UNKNOWN, undo=self._rollback, failed="commit failed"):
                    self._commit()
            finally:
                if not synced:
                    self._synchronous("FULL")
            if self._erasure_pending:
                self.erase_physically()

    def append_audit(self, row: AuditRow) -> None:
        with self._lock:
            if self._batching:
                # One INSERT needs no savepoint of its own: SQLite undoes a statement that fails, alone
                # (unless the failure rolled the whole transaction back: then the batch is torn).
                try:
                    with SQLITE.translated():
                        SQLiteTx(self._db, self._pending).append_audit(row)
                finally:
                    self._batch_torn = self._batch_torn or not self._db.in_transaction
                return
            try:  # a store in memory has no spool, and no other connection to wait for
                with self._writing(synced=False, wait=self._spool is None) as tx:
                    tx.append_audit(row)
            except _WriteLockTaken:
                assert self._spool is not None
                self._spool.put(row)  # another process writes: the row must not wait for it (audit_spool.py)

    def drain_audit(self) -> None:
        """Waits until the audit rows handed to the spool so far are written."""
        if self._spool is not None:
            self._spool.drain()

    def expect_idempotency(self, scope: Scope, principal: str, keys: Sequence[str]) -> None:
        """Nothing to gain: a lookup is a local B-tree read, not a round trip."""

    @contextmanager
    def batch(self, before_commit: Callable[[], None] | None = None) -> Iterator[None]:
        """One transaction (and one sync) for every write inside the block, each write a savepoint of
        it: a write that fails rolls back alone, and none is durable before the block's commit, which
        raises MUTATION_OUTCOME_UNKNOWN when it fails (so `before_commit` is never needed). The thread
        holds the store for the whole block."""
        with self._lock:
            if self._batching:
                raise RuntimeError("batches do not nest")
            with SQLITE.translated():
                self._db.execute("BEGIN IMMEDIATE")
            self._batching = True
            self._pending = postings.PendingPostings()
            self._batch_torn = False
            try:
                yield
            except BaseException:
                self._batching = False
                self._rollback()
                raise
            self._batching = False
            with SQLITE.translated(
                ErrorCode.MUTATION_OUTCOME_UNKNOWN, undo=self._rollback, failed="batch commit failed"
            ):
                if self._batch_torn:
                    raise sqlite3.OperationalError("the batch lost writes it had made")
                self._pending.flush(self._db)
                self._commit()
            if self._erasure_pending:
                self.erase_physically()

    @contextmanager
    def _savepoint(self) -> Iterator[SQLiteTx]:
        with SQLITE.translated():
            self._db.execute("SAVEPOINT batch_write")
        mark, flushes = self._pending.mark(), self._pending.flushes
        try:
            with SQLITE.translated(failed="write failed inside a batch"):
                yield SQLiteTx(self._db, self._pending)
        except BaseException:
            self._pending.rewind(mark)
            # No write reads the postings, so no flush happens inside one; if one ever did, the batch
            # could no longer tell which written postings the rollback took back: it must not commit.
            self._batch_torn = self._batch_torn or self._pending.flushes != flushes
            with SQLITE.ignored(failed="savepoint rollback failed"):
                self._db.execute("ROLLBACK TO batch_write")
                self._db.execute("RELEASE batch_write")
            # A full disk or an I/O error can roll the whole transaction back: the batch's earlier writes went.
            self._batch_torn = self._batch_torn or not self._db.in_transaction
            raise
        with SQLITE.translated():
            self._db.execute("RELEASE batch_write")

    def _synchronous(self, level: str) -> None:
        """In WAL mode NORMAL skips the commit's sync; the WAL stays ordered, so nothing is ever torn."""
        with SQLITE.translated():
            self._db.execute(f"PRAGMA synchronous = {level}")

    @contextmanager
    def read(self, *, scope: Scope | None = None) -> Iterator[SQLiteTx]:
        with self._lock:
            if self._batching:  # the batch's own thread reads what it has written so far
                yield SQLiteTx(self._db, self._pending)
                return
            with self._transaction("BEGIN") as tx:
                yield tx
            self._rollback()

    def _rollback(self) -> None:
        if self._db.in_transaction:
            with SQLITE.ignored(failed="rollback failed"):
                self._db.execute("ROLLBACK")

    def erase_physically(self, *, now: bool = False) -> bool:
        """Copies the WAL into the (secure-deleting) main file and truncates it to zero bytes: each
        erasure costs its own pages, so nothing waits (`now` changes nothing)."""
        with self._lock:
            if self._batching:  # nothing is erased before the batch commits
                self._erasure_pending = True
                return False
            row = None
            with SQLITE.ignored():
                row = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            # Another process's open snapshot can hold the checkpoint back: retry after later writes.
            self._erasure_pending = row is None or row[0] != 0
            return not self._erasure_pending

    def refresh_statistics(self) -> None:
        """`PRAGMA optimize`, which SQLite's documentation advises after a schema's tables changed much:
        it runs ANALYZE only on the tables whose statistics it judges stale."""
        with self._lock, SQLITE.ignored():
            self._db.execute("PRAGMA optimize")

    def holds_data(self) -> bool:
        """Whether any scope has a journal: such a store must never get fresh keys."""
        with self.read() as tx:
            return tx.any_journal()

    # -- snapshots (host backup and restore) -------------------------------------------------------
    def apply_migrations(self) -> None:
        """Raises ContractError MIGRATION_LEDGER_INVALID or STORE_UNAVAILABLE."""
        with self._lock, SQLITE.translated():
            self._migrate()

    def copy_in_memory(self) -> SQLiteStore:
        """A consistent copy of the whole store in memory, by sqlite3's online backup API in one step.

        Other processes may keep writing: the copy is one committed state. It lives in memory so that
        nothing derived from plaintext ever reaches a disk outside the store while it is stripped.
        """
        copy = SQLiteStore(IN_MEMORY, run_migrations=False)
        with self._lock, SQLITE.translated(undo=copy.close):
            self._db.backup(copy._db)
        return copy

    @contextmanager
    def inspect(self) -> Iterator[SnapshotQueries]:
        """Whole-store reads in one consistent read transaction (host path only)."""
        with self.read():
            yield SnapshotQueries(self._db)

    @contextmanager
    def fill(self) -> Iterator[SnapshotQueries]:
        """Whole-store writes in one write transaction (a copy being filled from another store; host path only)."""
        with self.write():
            yield SnapshotQueries(self._db)

    def strip_derived_index(self) -> None:
        """Empties the full-text index of this (copied) store, then rewrites the file without free pages."""
        with self.write():
            SnapshotQueries(self._db).strip_derived_index()
        self.vacuum()

    def vacuum(self) -> None:
        with self._lock, SQLITE.translated():
            self._db.execute("VACUUM")

    def image(self) -> bytes:
        """The whole database as the bytes of one file (rollback-journal header; opening it in WAL mode
        switches it back)."""
        with self._lock, SQLITE.translated():
            return _rollback_journal_image(self._db.serialize())

    def close(self) -> None:
        if self._spool is not None:
            self._spool.close()
        with self._lock:
            if self._erasure_pending:
                self.erase_physically()
            self._db.close()


class _WriteLockTaken(Exception):
    """Another connection holds the file's write lock, and the caller would rather not wait for it."""


def _rollback_journal_image(image: bytes) -> bytes:
    """SQLite refuses to read a WAL-mode image in memory (it has no -shm file): mark it rollback-journal."""
    if len(image) < _FILE_FORMAT_BYTES.stop or image[_FILE_FORMAT_BYTES] == b"\x01\x01":
        return image
    fixed = bytearray(image)
    fixed[_FILE_FORMAT_BYTES] = b"\x01\x01"
    return bytes(fixed)
