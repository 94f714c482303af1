"""psycopg 3 behind the shared statements: `?` placeholders rewritten for psycopg, statements traced on request.

Imported only by the PostgreSQL store and vault, so `import engram_memory` never loads psycopg.
"""

from __future__ import annotations

import functools
import select
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import conninfo
from psycopg_pool import ConnectionPool

from engram_memory.stores.sql.connection import SqlCursor, StatementTracer

# Rows per round trip of a streamed read: chunks need libpq 17 (psycopg's binary wheel ships 18); an
# older libpq streams a row at a time.
STREAM_CHUNK_ROWS = 1000 if psycopg.pq.version() >= 170000 else 1

Connection = psycopg.Connection[tuple[Any, ...]]
PREPARE_THRESHOLD = 5  # psycopg's own default: runs of a statement before it is prepared on the server


@functools.lru_cache(maxsize=1024)
def psycopg_sql(sql: str, binary: bool = False) -> str:
    """The statement with psycopg's placeholders: `?` outside quotes becomes `%s` (`%b` when the values are
    sent in binary), and every `%` is doubled."""
    mark = "%b" if binary else "%s"
    out: list[str] = []
    quote: str | None = None
    for char in sql:
        if quote is not None:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "?":
            out.append(mark)
            continue
        out.append("%%" if char == "%" else char)
    return "".join(out)


class PsycopgConnection:
    """Runs the shared statements on one psycopg connection (the transaction is the store's).

    psycopg has no trace hook of its own (SQLite has its trace callback), so `tracer` is called here.
    A batch that holds rows back (deferred.py) sets `before_statement`, which writes them before any
    statement runs, unless the statement is one of the batch's own (`unflushed`).
    """

    def __init__(self, connection: Connection, tracer: StatementTracer | None = None) -> None:
        self.raw = connection
        self._tracer = tracer
        self.pipeline: psycopg.Pipeline | None = None  # set while a batch pipelines its statements
        self.before_statement: Callable[[], None] | None = None
        self._unflushed = False

    @contextmanager
    def unflushed(self) -> Iterator[None]:
        """Statements that may run while rows are held back: their answer does not depend on them."""
        before, self._unflushed = self._unflushed, True
        try:
            yield
        finally:
            self._unflushed = before

    def _flush(self) -> None:
        if self.before_statement is not None and not self._unflushed:
            with self.unflushed():
                self.before_statement()

    def execute(self, sql: str, parameters: Any = (), /, *, binary: bool = False) -> SqlCursor:
        """`binary`: the values go in PostgreSQL's binary format, which psycopg builds several times faster
        for arrays (the bulk statements of deferred.py)."""
        self._flush()
        statement = psycopg_sql(sql, binary)
        if self._tracer is not None:
            self._tracer(statement)
        cursor = self.raw.execute(statement, parameters)
        return cursor if self.pipeline is None else _PipelinedCursor(cursor, self.pipeline)

    def stream(self, sql: str, parameters: Any = (), /) -> Iterator[Any]:
        """The rows a chunk at a time as they are consumed, instead of the whole result in memory at once."""
        self._flush()
        statement = psycopg_sql(sql)
        if self._tracer is not None:
            self._tracer(statement)
        with self.raw.cursor() as cursor:
            yield from cursor.stream(statement, parameters, size=STREAM_CHUNK_ROWS)

    def sync(self) -> None:
        """Waits for every statement sent so far (pipelined): any of them that failed raises here."""
        if self.pipeline is not None:
            self.pipeline.sync()

    def commit(self) -> bool:
        """COMMIT, waited for; False when the server rolled back instead (a transaction that had failed)."""
        statement = "COMMIT"
        if self._tracer is not None:
            self._tracer(statement)
        cursor = self.raw.execute(statement)
        self.sync()
        return cursor.statusmessage == "COMMIT"


class _PipelinedCursor:
    """A pipelined statement's result: fetching waits for it (psycopg does), and so does its row count."""

    def __init__(self, cursor: psycopg.Cursor[tuple[Any, ...]], pipeline: psycopg.Pipeline) -> None:
        self._cursor = cursor
        self._pipeline = pipeline

    @property
    def rowcount(self) -> int:
        self._pipeline.sync()
        return self._cursor.rowcount

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cursor.fetchall())


def with_user(url: str, user: str) -> str:
    """The same connection string with another role: the runtime role shares the owner's URL."""
    return conninfo.make_conninfo(url, user=user)


def url_fields(url: str) -> dict[str, Any]:
    """The parts of a connection string (URL or key=value), password included: never print them whole."""
    return conninfo.conninfo_to_dict(url)


def database_bytes(url: str) -> int:
    """The size of the database the URL names (the host's statistics). Raises psycopg.Error."""
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as connection:
        row = connection.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


def check_idle_connection(connection: Connection) -> None:
    """The pool's check at every checkout, without a round trip when the connection is quiet.

    An idle connection owes the client nothing, so a readable socket means the server said something
    unasked — in practice that it ended the session (a terminated backend, a restart) — and only then
    is the server asked (psycopg_pool's own check, which raises for a dead connection). A round trip per
    checkout was a tenth of a search's time. Raises psycopg.Error for a connection the pool must replace.
    """
    if connection.closed or connection.broken:
        raise psycopg.OperationalError("the connection is closed")
    poller = select.poll()  # not select.select: a busy server's descriptors pass FD_SETSIZE
    poller.register(connection.fileno(), select.POLLIN)
    if poller.poll(0):
        ConnectionPool.check_connection(connection)


def connection_options(*, prepared: bool) -> dict[str, Any]:
    """How the store's connections are made. Unprepared (`prepare_threshold` None): psycopg otherwise
    prepares a statement on the server after its fifth run, which a pooler in transaction mode without
    prepared-statement support (PgBouncer before 1.21) hands to another client's session."""
    return {"autocommit": True, "prepare_threshold": PREPARE_THRESHOLD if prepared else None}


def open_pool(
    url: str,
    *,
    size: int,
    timeout_s: float,
    name: str,
    prepare: Callable[[Connection], None],
    prepared: bool = True,
    first_url: str | None = None,
) -> ConnectionPool[Connection]:
    """A pool of autocommit connections, after `prepare` ran on a first connection of its own (to
    `first_url` when given: the primary without the pooler, for the owner's migrations).

    The first connection fails fast (one attempt, `timeout_s`) so that a command facing a server it
    cannot reach says so at once; the pool then fills in the background and replaces broken connections.
    Raises psycopg.Error, or whatever `prepare` raises.
    """
    options = connection_options(prepared=prepared)
    with psycopg.connect(first_url or url, connect_timeout=max(2, int(timeout_s)), **options) as first:
        prepare(first)
    return open_standing_pool(url, size=size, timeout_s=timeout_s, name=name, prepared=prepared)


def open_standing_pool(
    url: str, *, size: int, timeout_s: float, name: str, prepared: bool = True
) -> ConnectionPool[Connection]:
    """A pool that fills in the background, whether or not its server answers yet (a standby may be
    down when the store opens: its reads go elsewhere until it answers)."""
    pool: ConnectionPool[Connection] = ConnectionPool(
        url,
        min_size=1,
        max_size=max(1, size),
        kwargs=connection_options(prepared=prepared),
        open=False,
        timeout=timeout_s,
        check=check_idle_connection,
        name=name,
    )
    pool.open(wait=False)
    return pool
