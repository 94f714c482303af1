"""The verifier's and the host's reads of the full-text index, written once for both stores.

The two indexes hold the same rows (one per current record, a column per field) under different
names: PostgreSQL keys a row by `rid` and has tenant and workspace columns (what is written here), FTS5
keys it by `rowid` and finds a scope by its scope token (what the SQLite transaction says instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram_memory.engine.ports.lexical import FIELDS
from engram_memory.engine.ports.operations import IndexEntry
from engram_memory.engine.ports.rows import Scope
from engram_memory.stores.sql.base import SqlBase

FIELD_COLUMNS = tuple(f"f_{name}" for name in FIELDS)


class IndexReads(SqlBase):
    _INDEX_KEY = "rid"
    """The index row's key column, which is also the record row's `rid` (FTS5 calls it `rowid`)."""

    def _index_scope(self, scope: Scope) -> tuple[str, Sequence[Any]]:
        """The condition (on the index as `f`) selecting one scope's rows, and its parameters: by its
        tenant and workspace columns, which FTS5's table does not have (it matches its scope token)."""
        return "f.tenant = ? AND f.workspace = ?", (scope.tenant, scope.workspace)

    def index_entries(self, scope: Scope) -> list[IndexEntry]:
        self._enter_tenant(scope.tenant)
        key = f"f.{self._INDEX_KEY}"
        where, parameters = self._index_scope(scope)
        rows = self._db.execute(
            f"SELECT {key}, r.record_id, r.tenant, r.workspace, {', '.join('f.' + c for c in FIELD_COLUMNS)}"  # noqa: S608
            f" FROM lexical_index AS f LEFT JOIN records AS r ON r.rid = {key} WHERE {where} ORDER BY {key}",
            parameters,
        ).fetchall()
        return [
            IndexEntry(
                rowid=int(row[0]),
                record_id=row[1],
                record_scope=None if row[1] is None else Scope(tenant=row[2], workspace=row[3]),
                fields={name: str(value or "") for name, value in zip(FIELDS, row[4:], strict=True)},
            )
            for row in rows
        ]

    def index_row_count(self) -> int:
        # Spans scopes on purpose: the verifier compares the whole index with every current record, and
        # rows under a scope no record owns show up only in the total.
        return int(self._db.execute("SELECT count(*) FROM lexical_index").fetchone()[0])

    def indexed_counts(self) -> dict[Scope | None, int]:
        # Spans scopes on purpose: statistics are the host's view of the whole store.
        rows = self._db.execute(
            "SELECT r.tenant, r.workspace, count(*) FROM lexical_index AS f"  # noqa: S608
            f" LEFT JOIN records AS r ON r.rid = f.{self._INDEX_KEY} GROUP BY r.tenant, r.workspace"
        )
        return {(None if row[0] is None else Scope(row[0], row[1])): int(row[2]) for row in rows}
