"""Which node answers a read: a hot standby that has replayed everything the read must see, or the primary.

A standby's snapshot is some moment of the primary's past, measured by how far it has replayed the
primary's WAL (an LSN). Each scope needs a position: the highest LSN of this process's own commits in
it and of what its reads have already seen there. A read of the scope goes to a standby that has
replayed at least that far, found at once or waited for up to `wait_s`; past that, and when a standby
fails, the primary answers. So a read never misses a write this process acknowledged, nor goes back
behind a read before it (a second page never comes from an older snapshot than the first). Positions
live in this process: several servers behind one address need their balancer to keep an agent's
session on one of them (the MCP session id).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg
from psycopg_pool import ConnectionPool, PoolTimeout

from engram_memory.engine.ports.rows import Scope
from engram_memory.stores.postgres.connection import Connection

# The node's position: how far it has replayed (a standby), or written (a primary, e.g. once promoted).
POSITION_SQL = (
    "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn()"
    " ELSE pg_current_wal_insert_lsn() END - '0/0'::pg_lsn)::int8"
)
# After a commit on the primary, a position at or past it: for a commit that waited for its flush, how far
# WAL is flushed (a standby can have no more); for one that did not wait, how far WAL is inserted, which a
# standby reaches once the WAL writer has flushed it.
FLUSHED_SQL = "SELECT (pg_current_wal_flush_lsn() - '0/0'::pg_lsn)::int8"
INSERTED_SQL = "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::int8"
WAIT_S = 0.25  # how long a read waits for a standby to replay its position before the primary answers
POLL_S = 0.002  # between two looks at a standby's position while waiting
CHECKOUT_S = 0.2  # a standby's pool gives a connection within this, or the standby counts as failed
RESTING_S = 2.0  # a standby that failed, or could not catch up in time, is not asked for this long
MAX_WAITS_KEPT = 100_000  # waits kept for the figures: the latest
MAX_SCOPES = 50_000  # positions kept by scope; an evicted scope's position becomes the floor of all


class Positions:
    """The position each scope's reads must have reached. Thread-safe."""

    def __init__(self, capacity: int = MAX_SCOPES) -> None:
        self._lock = threading.Lock()
        self._by_scope: OrderedDict[Scope, int] = OrderedDict()
        self._floor = 0
        self._capacity = capacity

    def advance(self, scopes: Collection[Scope] | None, lsn: int) -> None:
        """`scopes` None: a write of the whole store, which every scope's reads must see."""
        with self._lock:
            if scopes is None:
                self._floor = max(self._floor, lsn)
                return
            for scope in scopes:
                if lsn > self._by_scope.get(scope, 0):
                    self._by_scope[scope] = lsn
                self._by_scope.move_to_end(scope)
            while len(self._by_scope) > self._capacity:
                _, evicted = self._by_scope.popitem(last=False)
                self._floor = max(self._floor, evicted)

    def required(self, scope: Scope) -> int:
        with self._lock:
            return max(self._floor, self._by_scope.get(scope, 0))


@dataclass(slots=True)
class Standby:
    pool: ConnectionPool[Connection]
    seen: int = 0  # its position when last asked
    resting_until: float = 0.0


@dataclass(slots=True)
class RoutingStats:
    """What the router did since the store opened (the benchmark's figures)."""

    standby_reads: int = 0
    fallbacks: int = 0  # reads no standby could serve in time (or at all), answered by the primary
    failures: int = 0  # standbys that failed a checkout or a read
    waits_s: list[float] = field(default_factory=list)  # reads that waited for a standby: how long (the last)

    def copy(self) -> RoutingStats:
        return RoutingStats(self.standby_reads, self.fallbacks, self.failures, list(self.waits_s))


class ReadRouter:
    """Chooses the standby for a read; the store runs the read and reports back."""

    def __init__(
        self,
        pools: list[ConnectionPool[Connection]],
        *,
        wait_s: float = WAIT_S,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.standbys = [Standby(pool) for pool in pools]
        self.positions = Positions()
        self._wait_s = wait_s
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next = 0
        self._stats = RoutingStats()

    def stats(self) -> RoutingStats:
        with self._lock:
            return self._stats.copy()

    def _order(self, required: int) -> list[Standby]:
        """Standbys known to have the position first (taken in turn), then the others by how far they were."""
        now = self._clock()
        with self._lock:
            self._next += 1
            turn = self._next
        awake = [standby for standby in self.standbys if standby.resting_until <= now]
        ready = [standby for standby in awake if standby.seen >= required]
        if ready:
            first = turn % len(ready)
            ready = ready[first:] + ready[:first]
        behind = sorted((standby for standby in awake if standby.seen < required), key=lambda s: -s.seen)
        return ready + behind

    @contextmanager
    def standby_for(self, required: int) -> Iterator[tuple[Standby, Connection] | None]:
        """A standby's connection whose node has replayed `required`, or None: the primary must answer."""
        chosen = self._choose(required)
        with self._lock:
            if chosen is None:
                self._stats.fallbacks += 1
            else:
                self._stats.standby_reads += 1
        if chosen is None:
            yield None
            return
        standby, connection = chosen
        try:
            yield chosen
        finally:
            standby.pool.putconn(connection)

    def _choose(self, required: int) -> tuple[Standby, Connection] | None:
        for index, standby in enumerate(self._order(required)):
            try:
                connection = standby.pool.getconn(timeout=CHECKOUT_S)
            except (PoolTimeout, psycopg.Error):
                self.failed(standby)
                continue
            try:
                # Only the first candidate is waited for: the others are asked once.
                if self._reached(standby, connection, required, wait=index == 0):
                    return standby, connection
            except psycopg.Error:
                self.failed(standby)
            standby.pool.putconn(connection)
        return None

    def _reached(self, standby: Standby, connection: Connection, required: int, *, wait: bool) -> bool:
        started = self._clock()
        deadline = started + (self._wait_s if wait else 0.0)
        waited = False
        while True:
            standby.seen = _position(connection)
            if standby.seen >= required:
                if waited:
                    with self._lock:
                        if len(self._stats.waits_s) >= MAX_WAITS_KEPT:
                            del self._stats.waits_s[: MAX_WAITS_KEPT // 2]
                        self._stats.waits_s.append(self._clock() - started)
                return True
            if self._clock() >= deadline:
                if wait:
                    standby.resting_until = self._clock() + RESTING_S  # behind by more than a wait
                return False
            self._sleep(POLL_S)
            waited = True

    def failed(self, standby: Standby) -> None:
        standby.resting_until = self._clock() + RESTING_S
        with self._lock:
            self._stats.failures += 1

    def close(self) -> None:
        for standby in self.standbys:
            standby.pool.close()


def _position(connection: Connection) -> int:
    row = connection.execute(POSITION_SQL).fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def position_of(connection: Connection) -> int:
    """The node's position now, on a connection inside or outside a transaction. Raises psycopg.Error."""
    return _position(connection)


def committed_position(connection: Connection, *, flushed: bool) -> int:
    """On the primary, after a commit (`flushed`: one that waited for its WAL to be flushed): a position at
    or past that commit. Raises psycopg.Error."""
    row = connection.execute(FLUSHED_SQL if flushed else INSERTED_SQL).fetchone()
    return int(row[0]) if row and row[0] is not None else 0
