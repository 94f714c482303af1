"""The one seam between the shared statements and a dialect: the connection and the few SQL fragments that differ."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from engram_memory.stores.sql.connection import SqlConnection


class StoreInvariantError(Exception):
    """A statement would break what the schema cannot say (index statistics of a scope with no journal, ...).

    Stores treat it like a driver error: the transaction rolls back and the caller sees STORE_UNAVAILABLE.
    """


class SqlBase:
    """What every statement mixin reads: the open connection and the dialect's fragments (SQLite's by default)."""

    _db: SqlConnection
    # The scope condition of a read of several ids. A store whose planner could prefer a scope-prefix
    # index to the ids' unique index (a scan of the whole scope per page of hits) overrides it.
    _SCOPE_OF_IDS = "tenant = ? AND workspace = ?"

    def _enter_tenant(self, tenant: str) -> None:
        """Called before a statement touches a tenant's rows; PostgreSQL's row-level security needs it."""

    def _streamed(self, sql: str, parameters: Sequence[Any]) -> Iterable[Sequence[Any]]:
        """The rows of a read that may be as long as the store (a journal, the audit log), fetched as
        they are consumed. A SQLite cursor already steps through its rows; a server store's driver
        would hold the whole result in memory, so it overrides this."""
        rows: Iterable[Sequence[Any]] = self._db.execute(sql, parameters)
        return rows

    @staticmethod
    def _json_text(column: str, *path: str) -> str:
        """An expression for the text at `path` inside a JSON text column."""
        return f"json_extract({column}, '$.{'.'.join(path)}')"

    @staticmethod
    def _raw(column: str) -> str:
        """An expression for a text column's stored bytes, so damaged text reaches the verifier undecoded."""
        return f"CAST({column} AS BLOB)"
