"""How the server store opens a writer's transaction in one round trip, and shares one among a batch's writes.

A writer's transaction needs its lock timeout, its advisory locks, often its tenant for row-level
security, and sometimes a relaxed commit: sent as one simple-protocol string, these cost one round trip
instead of five. Every value in it is an integer or a quoted literal, never text a caller chose unquoted.

A batch (Store.batch: a host's import, the calls the server groups into one commit) runs its writes in one
transaction on one pipelined connection. The rows of the hot path are held back and written in bulk
(deferred.py, bulk.py; decision 0021); a write that runs a statement of its own gets a savepoint first,
so a write that fails rolls back alone either way. It holds the locks of one set of scopes at a time: a
write that needs another scope's lock first commits what the batch holds (committing early is allowed,
once the vault committed the keys of the bodies it makes durable: Store.batch's `before_commit`), so a
batch never waits for a lock while it holds one another writer may want, and two batches never
deadlock. It also commits every `CHUNK_WRITES` writes (or `CHUNK_SAVEPOINTS` savepoints), which bounds
how long others wait for its scope. Its audit rows wait for its next commit and go in as one statement
per tenant; they commit with the writes they audit, or are lost with them. Once a commit inside the
batch failed, or rows held for it could not be written, its later writes refuse, and its end raises
MUTATION_OUTCOME_UNKNOWN: the caller may send the same calls with the same keys again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.ports.rows import AuditRow, Scope
from engram_memory.stores.postgres import bulk
from engram_memory.stores.postgres.connection import PsycopgConnection
from engram_memory.stores.postgres.deferred import PendingWrites
from engram_memory.stores.postgres.faults import POSTGRES
from engram_memory.stores.postgres.heads import HeadCache
from engram_memory.stores.postgres.lock_facts import LockFacts
from engram_memory.stores.postgres.queries import PostgresTx

WRITE_BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
MOVED_AWAY = "EM001"  # engram_tenant_here's SQLSTATE (migration 0010)
CHUNK_WRITES = 500  # writes (and the thread's reads) per commit: how long a batch makes others wait for its scope
CHUNK_SAVEPOINTS = 60  # savepoints per commit: under the 64 subtransactions a backend caches


# A writer's statements are planned for the values of each execution. A generic plan is made once, from
# the statistics of the moment, and kept: one made while a table was new looked idempotency keys and
# records by digest up through the wrong index, then scanned the whole scope on every call (0.5-0.6 ms a
# read, growing with the scope). Planning a writer's short statements costs tens of microseconds; reads
# (search) keep generic plans, which planning each time made about 10 % slower.
_CUSTOM_PLANS = "set_config('plan_cache_mode', 'force_custom_plan', true)"


def begin_writer(
    db: PsycopgConnection,
    *,
    write_lock: int,
    lock_timeout: str,
    keys: Sequence[int] | None,
    tenant: str | None,
    relaxed: bool = False,
    writes_for: Collection[str] = (),
) -> None:
    """Begins a writer's transaction in one round trip: the lock timeout and custom plans, then the
    database's write lock (exclusive when `keys` is None, else shared), then each key's lock in the order
    given (sorted by the caller, so two writers never deadlock), then the tenant; last, that none of the
    tenants it `writes_for` was moved to another cluster. A target list is evaluated in order."""
    literal = _literal(db.raw)
    first = [f"set_config('lock_timeout', {literal(lock_timeout)}, true)", _CUSTOM_PLANS]
    if keys is None:
        first.append(f"pg_advisory_xact_lock({int(write_lock)})")
    else:
        first.append(f"pg_advisory_xact_lock_shared({int(write_lock)})")
        first.extend(f"pg_advisory_xact_lock({int(key)})" for key in keys[:1])
    if tenant is not None:
        first.append(f"set_config('app.tenant', {literal(tenant)}, true)")
    statements = [WRITE_BEGIN, "SELECT " + ", ".join(first)]
    statements += [f"SELECT pg_advisory_xact_lock({int(key)})" for key in (keys or [])[1:]]
    if writes_for:
        # Raises once one of the tenants was moved away. A statement of its own, after the locks: its
        # snapshot then sees a move committed while this writer waited for them.
        statements.append("SELECT " + ", ".join(f"engram_tenant_here({literal(name)})" for name in sorted(writes_for)))
    if relaxed:
        statements.append("SET LOCAL synchronous_commit TO OFF")
    if db.pipeline is None:
        db.execute("; ".join(statements))
        return
    for statement in statements:  # a pipeline sends each on its own, without waiting
        db.execute(statement)
    db.sync()  # a lock that timed out raises here, before the transaction holds anything


def moved_away(error: ContractError) -> bool:
    """Whether a write was refused because a tenant it names was moved to another cluster."""
    cause = error.__cause__
    return isinstance(cause, psycopg.Error) and cause.sqlstate == MOVED_AWAY


def only_tenant(scopes: Collection[Scope] | None) -> str | None:
    """The tenant every named scope belongs to, which the transaction may name before its first statement."""
    tenants = {scope.tenant for scope in scopes or ()}
    return next(iter(tenants)) if len(tenants) == 1 else None


def _literal(connection: psycopg.Connection[tuple[object, ...]]) -> Callable[[str], str]:
    return lambda value: sql.Literal(value).as_string(connection)


class Batch:
    """One thread's batch on one pooled connection (the store checks it out and returns it)."""

    def __init__(
        self,
        db: PsycopgConnection,
        *,
        write_lock: int,
        lock_timeout: str,
        lock_key: Callable[[Scope], int],
        before_commit: Callable[[], None] | None = None,
    ) -> None:
        self.db = db
        self._before_commit = before_commit
        self.thread = threading.get_ident()
        self.failed = False
        self._write_lock = write_lock
        self._lock_timeout = lock_timeout
        self._lock_key = lock_key
        self._open = False
        self._held: frozenset[int] = frozenset()
        self._tenant: str | None = None
        self._writes = 0
        self._savepoints = 0
        self._audits: list[AuditRow] = []
        self._heads = HeadCache(self.holds_lock)
        self.facts = LockFacts(self.holds_lock)
        self._pending = PendingWrites()
        self._tx: PostgresTx | None = None  # the write running now
        self._savepoint_open = False  # whether it has a savepoint (it ran a statement of its own)
        self._expected: set[Scope] = set()
        self.touched: set[Scope] = set()  # every scope a write of the batch named (their reads must see it)
        db.before_statement = self._before_statement

    def expect_scope(self, scope: Scope) -> None:
        """The batch will write in this scope: the next transaction it opens takes its lock with the
        others, so that calls of several scopes (a group of several agents' calls) share one commit."""
        self._expected.add(scope)

    def holds_lock(self, scope: Scope) -> bool:
        return self._lock_key(scope) in self._held

    def defer_audit(self, row: AuditRow) -> None:
        """Holds an audit row back to the batch's next commit."""
        if self.failed:
            raise ContractError(ErrorCode.STORE_UNAVAILABLE)
        self._audits.append(row)

    @contextmanager
    def savepoint(self, scopes: Collection[Scope]) -> Iterator[PostgresTx]:
        """One write (or read) of the batch, under the scopes' locks: its rows are held back
        (deferred.py), and it gets a savepoint of the transaction only when it runs a statement."""
        if self.failed:
            raise ContractError(ErrorCode.STORE_UNAVAILABLE)
        self.touched.update(scopes)
        keys = frozenset(self._lock_key(scope) for scope in scopes)
        full = self._writes >= CHUNK_WRITES or self._savepoints >= CHUNK_SAVEPOINTS
        if self._open and (full or not keys <= self._held):
            self.commit(early=True)
            if self.failed:
                raise ContractError(ErrorCode.STORE_UNAVAILABLE)
        if not self._open:
            try:
                # The scopes the batch expects to write are locked with this write's, in one order.
                self._begin({*scopes, *self._expected})
            except ContractError as exc:
                if not (moved_away(exc) and self._expected - set(scopes)):
                    raise
                # A tenant of the others moved away: that is theirs to hear, each alone, not this write's.
                self._expected.clear()
                self._begin(set(scopes))
        self._pending.begin_write()
        tx = PostgresTx(self.db, tenant=self._tenant, heads=self._heads, pending=self._pending, facts=self.facts)
        self._tx, self._savepoint_open = tx, False
        try:
            with POSTGRES.translated(failed="write failed inside a batch", conflicts_rerun=True):
                yield tx
                if self._savepoint_open:
                    with self.db.unflushed():
                        self.db.execute("RELEASE SAVEPOINT batch_write")
                        self.db.sync()  # this write's statements all ran: a failure of one is this write's
        except BaseException:
            self._failed_write()
            raise
        finally:
            self._tx, self._savepoint_open = None, False
        self._tenant = tx.tenant
        self._writes += 1

    def _begin(self, wanted: set[Scope]) -> None:
        """Opens the batch's transaction for these scopes. Nothing is held yet: a failure (a lock that timed
        out, a tenant moved away) fails this write alone, as outside a batch."""
        keys = frozenset(self._lock_key(scope) for scope in wanted)
        tenant = only_tenant(wanted)
        with POSTGRES.translated(undo=self.rollback, conflicts_rerun=True), self.db.unflushed():
            begin_writer(
                self.db,
                write_lock=self._write_lock,
                lock_timeout=self._lock_timeout,
                keys=sorted(keys),
                tenant=tenant,
                writes_for={scope.tenant for scope in wanted},
            )
        self._open, self._held, self._tenant, self._writes, self._savepoints = True, keys, tenant, 0, 0

    def _failed_write(self) -> None:
        """Undoes the write that failed: its held rows, and what of it reached the transaction."""
        self._heads.clear()
        self.facts.clear()
        self._pending.rollback_write()
        self._tenant = None  # app.tenant may have moved outside any savepoint: the next write sets it again
        with POSTGRES.ignored(), self.db.unflushed():
            self.db.sync()  # what was still in flight: its failure is this write's too
        if self._savepoint_open:
            # Rolling back to the savepoint also undoes a tenant set inside it.
            with POSTGRES.ignored(undo=self._abandon, failed="savepoint rollback failed"), self.db.unflushed():
                self.db.execute("ROLLBACK TO SAVEPOINT batch_write")
                self.db.execute("RELEASE SAVEPOINT batch_write")
                self.db.sync()

    def _before_statement(self) -> None:
        """A statement of the batch is about to run: the rows held back go first. Inside a write, those
        of earlier writes go before its savepoint, and its own after it, so its failure undoes its own."""
        if self._tx is not None and not self._savepoint_open:
            # Rows of earlier writes: lost with the transaction if they fail, so the batch is then failed.
            with POSTGRES.translated(undo=self._abandon, failed="held rows could not be written"):
                self._write_pending(before_write=True)
                self.db.execute("SAVEPOINT batch_write")
                self.db.sync()
            self._savepoint_open = True
            self._savepoints += 1
        self._write_pending(before_write=False)

    def _write_pending(self, *, before_write: bool) -> None:
        ops = self._pending.take(before_write=before_write)
        if not ops:
            return
        tenant_now = self._tx.tenant if self._tx is not None else self._tenant
        check = bulk.write(self._execute_binary, ops, tenant_now=tenant_now, enter=self._enter)
        check()  # reads row counts: waits for the statements above

    def _execute_binary(self, sql: str, parameters: Sequence[Any]) -> Any:
        return self.db.execute(sql, parameters, binary=True)

    def _enter(self, tenant: str) -> None:
        self.db.execute("SELECT set_config('app.tenant', ?, true)", (tenant,))

    def commit(self, *, early: bool) -> None:
        """Commits what the batch holds; a failure marks the batch failed (its end reports it). An early
        commit (before the batch's end) first has the vault commit the keys its bodies need."""
        if self.failed or not (self._open or self._audits):
            return
        if early and self._before_commit is not None:
            try:
                self._before_commit()
            except ContractError:
                self._abandon()
                return
        audits, self._audits = self._audits, []
        self._heads.clear()  # its locks go with the commit
        self.facts.clear()
        with POSTGRES.ignored(undo=self._abandon, failed="batch commit failed"), self.db.unflushed():
            if not self._open:  # audit rows alone: of no scope, under no scope's lock
                begin_writer(
                    self.db, write_lock=self._write_lock, lock_timeout=self._lock_timeout, keys=[], tenant=None
                )
                self._tenant = None
            self._open = False
            self._write_pending(before_write=False)
            if audits:
                PostgresTx(self.db, tenant=self._tenant).append_audits(audits)
            if not self.db.commit():  # a transaction that had failed unseen rolls back instead
                self._abandon()

    def rollback(self) -> None:
        self._open = False
        self._heads.clear()
        self.facts.clear()
        self._pending.clear()
        with POSTGRES.ignored(failed="rollback failed"), self.db.unflushed():
            self.db.sync()
        if self.db.raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with POSTGRES.ignored(failed="rollback failed"), self.db.unflushed():
                self.db.execute("ROLLBACK")
                self.db.sync()

    def _abandon(self) -> None:
        """What the batch held is lost (or its outcome unknown): nothing more of it may commit."""
        self.failed = True
        self.rollback()
