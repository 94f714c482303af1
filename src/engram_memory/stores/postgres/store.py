"""The server store: PostgreSQL through a psycopg connection pool, shared by several server processes.

Every write is one READ COMMITTED transaction that first takes transaction-scoped advisory locks: one
per scope it names (in one order, so two writers never deadlock), beneath the database's write lock
taken shared. Writers of one scope queue exactly as SQLite's BEGIN IMMEDIATE makes them queue, across
processes and machines, which keeps each scope's journal chain, dense cursors, idempotency keys and
every read-then-write of the engine simply correct; writers of other scopes commit beside them. A
writer that names no scope (the host's whole-store work) takes the write lock exclusively and waits
for all of them. Reads are REPEATABLE READ READ ONLY snapshots and never wait for writers.

Searches and gets may go to hot standbys (`read_urls`, routing.py): a read of a scope waits for, or
skips, a standby that has not replayed this process's writes there, and a standby that fails or
conflicts with recovery hands the read back to the engine to run again elsewhere (TransientConflict).

Driver errors are translated here, at the transaction boundary (through `POSTGRES`, which names the
fault from the server's SQLSTATE): a failure before COMMIT is
STORE_UNAVAILABLE (nothing was written), a serialization failure or deadlock is TransientConflict
(nothing was written; the engine runs the body again), and a failure of COMMIT itself is
MUTATION_OUTCOME_UNKNOWN (the caller resolves it by retrying with the same idempotency key).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager

import psycopg

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.ports.faults import TransientConflict
from engram_memory.engine.ports.rows import AuditRow, Scope
from engram_memory.stores.postgres import postings
from engram_memory.stores.postgres.batching import WRITE_BEGIN, Batch, begin_writer, only_tenant
from engram_memory.stores.postgres.connection import (
    Connection,
    PsycopgConnection,
    connection_options,
    open_pool,
    open_standing_pool,
)
from engram_memory.stores.postgres.erasure import erasure_requested, may_vacuum, vacuum
from engram_memory.stores.postgres.faults import POSTGRES
from engram_memory.stores.postgres.migrate import STORE_MIGRATIONS, migrate, pending
from engram_memory.stores.postgres.queries import PostgresTx
from engram_memory.stores.postgres.routing import ReadRouter, RoutingStats, committed_position, position_of
from engram_memory.stores.postgres.snapshot import PostgresSnapshot
from engram_memory.stores.sql.connection import StatementTracer

logger = logging.getLogger(__name__)

DEFAULT_POOL_SIZE = 4
CONNECT_TIMEOUT_S = 10.0
LOCK_TIMEOUT = "10s"  # how long a writer waits for the write lock, as SQLite's busy timeout
# pg_advisory_xact_lock key every writer of one database takes ("engram-w" in ASCII): shared by writers
# of named scopes, exclusive for a writer of the whole store.
WRITE_LOCK = 0x656E6772616D2D77
ERASURE_DELAY_S = 60.0  # forgets within this long share one rewrite of the index tables (erase_physically)


class SchemaNotCurrent(ContractError):
    """The database lacks migrations this version needs, and this connection may not apply them."""

    def __init__(self, versions: list[int]) -> None:
        super().__init__(ErrorCode.STORE_UNAVAILABLE)
        self.versions = versions


class PostgresStore:
    """Thread-safe: each transaction takes its own pooled connection."""

    index_name = "postgresql-tsvector"

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        run_migrations: bool = True,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        tracer: StatementTracer | None = None,
        erasure_delay_s: float = ERASURE_DELAY_S,
        read_urls: Sequence[str] = (),
        direct_url: str | None = None,
        prepared_statements: bool = True,
    ) -> None:
        """`run_migrations=False` is the runtime role's way in: it may not change the schema, so a
        database behind this version raises SchemaNotCurrent instead. `tracer` sees every statement
        the store's transactions and erasures run, as sent to psycopg. `erasure_delay_s`: how long the
        first of a run of erasures waits to be compacted with those after it (erase_physically).
        `read_urls`: hot standbys for searches and gets. `direct_url`: the primary without a pooler,
        for migrations and erasure's VACUUM FULL (which needs a session setting of its own).
        `prepared_statements=False`: none on the server (a pooler in transaction mode).

        Raises ContractError STORE_UNAVAILABLE, MIGRATION_LEDGER_INVALID.
        """
        self._timeout_s = connect_timeout_s
        self._tracer = tracer
        self._erasure_pending = False
        self._erasure_delay_s = erasure_delay_s
        self._batches: dict[int, Batch] = {}  # by thread: each thread's batch is its own
        self.migrated: list[int] = []  # the schema versions this open applied
        self._owner_url = direct_url or url
        self._prepared = prepared_statements
        self._synchronous_standby = False

        def prepare(connection: Connection) -> None:
            if run_migrations:
                self.migrated = migrate(connection, STORE_MIGRATIONS)
                _backfill_postings(connection)
            else:
                behind = pending(connection, STORE_MIGRATIONS)
                if behind:
                    raise SchemaNotCurrent(behind)
            self._may_vacuum = may_vacuum(connection)
            # An erasure a runtime process could not finish is finished by the next owner process.
            self._erasure_pending = self._may_vacuum and erasure_requested(connection)
            self._synchronous_standby = _synchronous_standby(connection)

        with POSTGRES.translated():
            self._pool = open_pool(
                url,
                size=pool_size,
                timeout_s=connect_timeout_s,
                name="engram-store",
                prepare=prepare,
                prepared=prepared_statements,
                first_url=direct_url if run_migrations else None,
            )
        self._router: ReadRouter | None = None
        if read_urls:
            pools = [
                open_standing_pool(
                    read_url,
                    size=pool_size,
                    timeout_s=connect_timeout_s,
                    name=f"engram-standby-{number}",
                    prepared=prepared_statements,
                )
                for number, read_url in enumerate(read_urls, 1)
            ]
            self._router = ReadRouter(pools)

    # -- transactions -------------------------------------------------------------------------
    def _checkout(self) -> Connection:
        with POSTGRES.translated():  # the pool's timeout (PoolTimeout) is a psycopg error too
            return self._pool.getconn(timeout=self._timeout_s)

    @contextmanager
    def _transaction(
        self,
        connection: Connection,
        begin: str,
        *,
        writer: bool,
        scopes: Collection[Scope] | None = None,
        snapshot: bool = False,
        relaxed: bool = False,
    ) -> Iterator[PostgresTx]:
        """Begins; a failure inside rolls back, and a driver error becomes STORE_UNAVAILABLE or TransientConflict."""
        db = PsycopgConnection(connection, self._tracer)
        tenant = only_tenant(scopes) if writer else None
        # A conflict rolls back the whole body, which the engine may therefore run again.
        with POSTGRES.translated(undo=lambda: _rollback(db), conflicts_rerun=True):
            if writer:
                keys = None if scopes is None else sorted({scope_lock_key(scope) for scope in scopes})
                begin_writer(
                    db,
                    write_lock=WRITE_LOCK,
                    lock_timeout=LOCK_TIMEOUT,
                    keys=keys,
                    tenant=tenant,
                    relaxed=relaxed,
                    writes_for={scope.tenant for scope in scopes or ()},
                )
            else:
                db.execute(begin)
        try:
            with POSTGRES.translated(failed="transaction failed before commit", conflicts_rerun=True):
                yield PostgresTx(db, snapshot=snapshot, tenant=tenant)
        except BaseException:
            _rollback(db)
            raise

    def _batch_here(self) -> Batch | None:
        return self._batches.get(threading.get_ident())

    @contextmanager
    def write(self, *, synced: bool = True, scopes: Collection[Scope] | None = None) -> Iterator[PostgresTx]:
        batch = self._batch_here()
        if batch is not None:
            if scopes is not None:
                with batch.savepoint(scopes) as tx:
                    yield tx
                return
            batch.commit(early=True)  # a whole-store writer waits for every other: the batch holds nothing meanwhile
            if batch.failed:
                raise ContractError(ErrorCode.STORE_UNAVAILABLE)
        connection = self._checkout()
        # With a synchronous standby every commit waits for it: a relaxed one could be lost at a failover.
        relaxed = not synced and not self._synchronous_standby
        try:
            with self._transaction(connection, WRITE_BEGIN, writer=True, scopes=scopes, relaxed=relaxed) as tx:
                yield tx
            db = tx.connection
            # The COMMIT may have reached the server before it failed: the outcome is unknown, unless
            # the server said it rolled back for a conflict (nothing written: TransientConflict).
            with POSTGRES.translated(
                ErrorCode.MUTATION_OUTCOME_UNKNOWN,
                undo=lambda: _rollback(db),
                failed="commit failed",
                conflicts_rerun=True,
            ):
                db.execute("COMMIT")
                if self._router is not None:
                    self._router.positions.advance(scopes, committed_position(connection, flushed=not relaxed))
        finally:
            self._pool.putconn(connection)
        if self._erasure_pending and batch is None:
            self.erase_physically()

    def append_audit(self, row: AuditRow) -> None:
        batch = self._batch_here()
        if batch is not None:
            batch.defer_audit(row)
            return
        with self.write(synced=False, scopes=()) as tx:
            tx.append_audit(row)

    def expect_idempotency(self, scope: Scope, principal: str, keys: Sequence[str]) -> None:
        batch = self._batch_here()
        if batch is not None:
            batch.facts.keys.expect(scope, principal, keys)
            batch.expect_scope(scope)

    @contextmanager
    def batch(self, before_commit: Callable[[], None] | None = None) -> Iterator[None]:
        """This thread's writes inside the block share transactions (stores/postgres/batching.py): each a
        savepoint, committed together per scope and every `CHUNK_WRITES` (60) savepoints; the end commits the rest
        and raises MUTATION_OUTCOME_UNKNOWN when any commit of the batch failed."""
        if self._batch_here() is not None:
            raise RuntimeError("batches do not nest")
        connection = self._checkout()
        db = PsycopgConnection(connection, self._tracer)
        batch = Batch(
            db,
            write_lock=WRITE_LOCK,
            lock_timeout=LOCK_TIMEOUT,
            lock_key=scope_lock_key,
            before_commit=before_commit,
        )
        self._batches[batch.thread] = batch
        try:
            with (
                POSTGRES.translated(ErrorCode.MUTATION_OUTCOME_UNKNOWN, failed="batch failed"),
                connection.pipeline() as pipeline,
            ):
                db.pipeline = pipeline
                try:
                    yield
                except BaseException:
                    batch.rollback()
                    raise
                batch.commit(early=False)
            if batch.failed:
                raise ContractError(ErrorCode.MUTATION_OUTCOME_UNKNOWN)
            if self._router is not None and batch.touched:
                with POSTGRES.translated(ErrorCode.MUTATION_OUTCOME_UNKNOWN, failed="batch position unknown"):
                    self._router.positions.advance(batch.touched, committed_position(connection, flushed=True))
        finally:
            db.pipeline = None
            del self._batches[batch.thread]
            self._pool.putconn(connection)
        if self._erasure_pending:
            self.erase_physically()

    @contextmanager
    def read(self, *, scope: Scope | None = None) -> Iterator[PostgresTx]:
        """`scope`: a read of that scope alone (a search, a get), which a standby may answer. A standby
        that fails under it raises TransientConflict, after which the next read of the scope goes elsewhere."""
        batch = self._batch_here()
        if batch is not None:  # the batch's own thread reads what it has written so far
            with batch.savepoint(()) as tx:
                yield tx
            return
        if scope is None or self._router is None:
            with self._primary_snapshot() as tx:
                yield tx
            return
        router = self._router
        with router.standby_for(router.positions.required(scope)) as standby:
            if standby is None:
                with self._primary_snapshot(seen_by=scope) as tx:
                    yield tx
                return
            node, connection = standby
            try:
                with self._snapshot(connection, seen_by=scope) as tx:
                    yield tx
            except ContractError as exc:
                if not isinstance(exc.__cause__, psycopg.Error):
                    raise  # the engine's own answer (NOT_FOUND, ...), not the standby's failure
                router.failed(node)
                raise TransientConflict() from exc

    @contextmanager
    def _primary_snapshot(self, *, seen_by: Scope | None = None) -> Iterator[PostgresTx]:
        connection = self._checkout()
        try:
            with self._snapshot(connection, seen_by=seen_by) as tx:
                yield tx
        finally:
            self._pool.putconn(connection)

    @contextmanager
    def _snapshot(self, connection: Connection, *, seen_by: Scope | None = None) -> Iterator[PostgresTx]:
        """A read-only snapshot; with `seen_by`, the node's position once the snapshot is taken becomes
        the scope's: a later read of it never goes back to an older one."""
        begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        with self._transaction(connection, begin, writer=False, snapshot=True) as tx:
            if seen_by is not None and self._router is not None:
                with POSTGRES.translated(undo=lambda: _rollback(tx.connection), conflicts_rerun=True):
                    self._router.positions.advance((seen_by,), position_of(connection))
            yield tx
        _rollback(tx.connection)

    def routing_stats(self) -> RoutingStats | None:
        """How reads were routed since the store opened; None without standbys."""
        return None if self._router is None else self._router.stats()

    # -- erasure ------------------------------------------------------------------------------
    def erase_physically(self, *, now: bool = False) -> bool:
        """Pushes erased bodies and index tokens out of the tables' live files (the owner role only).

        Plain VACUUM frees the pages of deleted rows but leaves their bytes in place, so the index
        tables, whose rows are tokens of plaintext, are rewritten (VACUUM FULL); bodies are ciphertext
        whose data key is destroyed, and plain VACUUM suffices. A rewrite costs the size of the tables,
        not of the erasure, so erasures are compacted together: the pass runs once the oldest waiting
        request is `erasure_delay_s` old (serve's housekeeping calls this every minute), or at once
        with `now` (`engram-memory erase`, a host's forget). False when nothing ran yet: not due, this
        role may not VACUUM (the runtime role: the owner's housekeeping finishes it), or an older
        snapshot still needs the rows (retried after later writes). Freed disk blocks, WAL segments,
        WAL archives and base backups are the operator's to manage.
        """
        if not self._may_vacuum:
            return False
        self._erasure_pending = True
        # A connection of its own, straight to the primary: VACUUM FULL runs outside any transaction, so
        # its lock timeout is a setting of the session, which no pooled connection may be left with.
        with POSTGRES.ignored(failed="vacuum failed"):
            with psycopg.connect(
                self._owner_url,
                connect_timeout=max(2, int(self._timeout_s)),
                **connection_options(prepared=self._prepared),
            ) as connection:
                db = PsycopgConnection(connection, self._tracer)
                done = vacuum(db, delay_s=0.0 if now else self._erasure_delay_s)
            # Not due yet: housekeeping (or the next erasure after the delay) runs it, not every write.
            self._erasure_pending = done is False
            return done is True
        return False

    def refresh_statistics(self) -> None:
        """VACUUM (ANALYZE), as PostgreSQL's guide to populating a database advises after a bulk load:
        until autovacuum gets to them, the tables an import filled are planned with their old, small
        statistics, and their new pages are not yet marked all-visible, so index-only scans still visit
        the heap. Plain VACUUM skips pages already all-visible: it costs about what the import wrote,
        plus ANALYZE's fixed sample of each table."""
        if not self._may_vacuum:
            return
        try:
            connection = self._checkout()
        except ContractError:
            return
        try:
            with POSTGRES.ignored(failed="analyze failed"):
                PsycopgConnection(connection, self._tracer).execute("VACUUM (ANALYZE)")
        finally:
            self._pool.putconn(connection)

    # -- host path ----------------------------------------------------------------------------
    @contextmanager
    def inspect(self) -> Iterator[PostgresSnapshot]:
        """Whole-store reads in one consistent read-only snapshot, for a backup (owner role); as SQLite's."""
        with self.read() as tx:
            yield PostgresSnapshot(tx.connection)

    @contextmanager
    def fill(self) -> Iterator[PostgresSnapshot]:
        """Whole-store writes in one transaction for a restore; it commits only if the block ends cleanly."""
        with self.write() as tx:
            yield PostgresSnapshot(tx.connection)

    def holds_data(self) -> bool:
        """Whether any scope has a journal: such a store must never get fresh keys (needs the owner role)."""
        with self.read() as tx:
            return tx.any_journal()

    def close(self) -> None:
        if self._erasure_pending:
            self.erase_physically()
        self._pool.close()
        if self._router is not None:
            self._router.close()


def scope_lock_key(scope: Scope) -> int:
    """The advisory lock key of one scope: 64 bits of a digest of its name. Two scopes that share a
    key (odds 2^-64 a pair) only queue on each other; none shares the write lock's key in practice."""
    raw = hashlib.sha256(f"engram-memory/scope-lock/{scope.tenant}\x00{scope.workspace}".encode()).digest()
    return int.from_bytes(raw[:8], "big", signed=True)


def _rollback(db: PsycopgConnection) -> None:
    if db.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        with POSTGRES.ignored(failed="rollback failed"):
            db.execute("ROLLBACK")


def _backfill_postings(connection: Connection) -> None:
    """A store indexed before schema 5 has index rows without postings: the owner derives them once, in one
    transaction that holds the write lock (two processes starting together do it once)."""
    db = PsycopgConnection(connection)
    row = db.execute(
        "SELECT EXISTS (SELECT 1 FROM lexical_index) AND NOT EXISTS (SELECT 1 FROM lexical_terms)"
    ).fetchone()
    if not (row and row[0]):
        return
    with connection.transaction():
        db.execute("SELECT pg_advisory_xact_lock(?)", (WRITE_LOCK,))
        if db.execute("SELECT EXISTS (SELECT 1 FROM lexical_terms)").fetchone()[0]:
            return
        written = postings.backfill(db)
    logger.info("derived the impact-ordered postings of %d indexed records", written)


def _synchronous_standby(connection: Connection) -> bool:
    """Whether commits wait for a standby (the operator named one): then none may skip waiting."""
    row = connection.execute("SELECT current_setting('synchronous_standby_names') <> ''").fetchone()
    return bool(row and row[0])
