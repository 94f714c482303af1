"""Numbered SQL migrations with a ledger: applied in order, each recorded with its digest.

A ledger row whose digest no longer matches the bundled file means the schema history was edited:
MIGRATION_LEDGER_INVALID, and the store is not opened.
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Iterator
from importlib import resources

from engram_memory.contract.errors import ContractError, ErrorCode

PACKAGE = "engram_memory.stores.sqlite"


def bundled(folder: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration in `folder`, in order."""
    found = []
    for entry in resources.files(PACKAGE).joinpath(folder).iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def checksum(sql: str) -> str:
    return "sha256:" + hashlib.sha256(sql.encode("utf-8")).hexdigest()


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
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL,"
            " digest TEXT NOT NULL, applied_at_ms INTEGER NOT NULL)"
        )
        applied = {
            row[0]: (row[1], row[2]) for row in db.execute("SELECT version, name, digest FROM schema_migrations")
        }
        done = []
        for version, name, sql in bundled(folder):
            if upto is not None and version > upto:
                break
            if version in applied:
                if applied[version] != (name, checksum(sql)):
                    raise ContractError(ErrorCode.MIGRATION_LEDGER_INVALID)
                continue
            for statement in statements(sql):
                db.execute(statement)
            db.execute(
                "INSERT INTO schema_migrations (version, name, digest, applied_at_ms) VALUES (?, ?, ?, ?)",
                (version, name, checksum(sql), time.time_ns() // 1_000_000),
            )
            done.append(version)
        unknown = set(applied) - {version for version, _, _ in bundled(folder)}
        if unknown:
            raise ContractError(ErrorCode.MIGRATION_LEDGER_INVALID)
        db.execute("COMMIT")
        return done
    except BaseException:
        db.execute("ROLLBACK")
        raise
