"""The few things the shared statements need of a database connection, whichever driver is underneath.

Statements are written once with `?` placeholders; sqlite3 takes them as they are, and the
PostgreSQL adapter rewrites them for psycopg. Booleans are stored as integers in both stores.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

StatementTracer = Callable[[str], None]
"""Sees every statement a store runs, before it runs: for tests and debugging, never for production logs
(SQLite hands it the statement with its values filled in, and values may be memory text)."""


class SqlCursor(Protocol):
    """A statement's result: rows as tuples, and how many rows a write touched."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class SqlConnection(Protocol):
    """Runs one statement inside the transaction the store opened."""

    def execute(self, sql: str, parameters: Any = ..., /) -> SqlCursor: ...
