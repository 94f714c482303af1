"""The few things the shared statements need of a database connection, whichever driver is underneath.

Statements are written once with `?` placeholders; sqlite3 takes them as they are, and the
PostgreSQL adapter rewrites them for psycopg. Booleans are stored as integers in both stores.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol


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
