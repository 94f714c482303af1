"""Numbered SQL migrations of the embedded store and its key vault, applied under the shared ledger.

A ledger row whose digest no longer matches the bundled file means the schema history was edited:
MIGRATION_LEDGER_INVALID, and the store is not opened (stores/sql/ledger.py holds the rule).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

from engram_memory.stores.sql import ledger
from engram_memory.stores.sql.ledger import checksum

__all__ = ["PACKAGE", "bundled", "checksum", "migrate", "statements"]

PACKAGE = "engram_memory.stores.sqlite"
LEDGER_DDL = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    " digest TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
)


def bundled(folder: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration in `folder`, in order."""
    return ledger.bundled(PACKAGE, folder)


def statements(sql: str) -> Iterator[str]:
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


def migrate(db: sqlite3.Connection, folder: str, *, upto: int | None = None) -> list[int]:
    """Applies what is missing in one transaction; returns the versions applied.

    Raises ContractError MIGRATION_LEDGER_INVALID when an applied migration differs from its file.
    """

    def run_script(sql: str) -> None:
        for statement in statements(sql):
            db.execute(statement)

    db.execute("BEGIN IMMEDIATE")
    try:
        done = ledger.apply_missing(db, LEDGER_DDL, bundled(folder), run_script, upto=upto)
        db.execute("COMMIT")
        return done
    except BaseException:
        db.execute("ROLLBACK")
        raise
