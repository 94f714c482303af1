"""The schema ledger both stores keep: numbered migrations, each recorded with its digest when applied.

A ledger row whose digest no longer matches the bundled file, or that names a migration this version
does not ship, means the schema history was edited: MIGRATION_LEDGER_INVALID, and the store is not
opened. The caller owns the transaction (and its lock), so a failure applies nothing.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from importlib import resources

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.stores.sql.connection import SqlConnection

Migration = tuple[int, str, str]  # version, file name, SQL


def bundled(package: str, folder: str) -> list[Migration]:
    """(version, name, sql) of every migration in `folder` of `package`, in order."""
    found = []
    for entry in resources.files(package).joinpath(folder).iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def checksum(sql: str) -> str:
    return "sha256:" + hashlib.sha256(sql.encode("utf-8")).hexdigest()


def applied_versions(db: SqlConnection) -> dict[int, tuple[str, str]]:
    return {int(row[0]): (row[1], row[2]) for row in db.execute("SELECT version, name, digest FROM schema_migrations")}


def missing(
    applied: Mapping[int, tuple[str, str]], migrations: list[Migration], *, upto: int | None = None
) -> list[Migration]:
    """The migrations still to apply, in order. Raises ContractError MIGRATION_LEDGER_INVALID."""
    if set(applied) - {version for version, _, _ in migrations}:
        raise ContractError(ErrorCode.MIGRATION_LEDGER_INVALID)
    todo = []
    for version, name, sql in migrations:
        if upto is not None and version > upto:
            break
        if version in applied:
            if applied[version] != (name, checksum(sql)):
                raise ContractError(ErrorCode.MIGRATION_LEDGER_INVALID)
            continue
        todo.append((version, name, sql))
    return todo


def apply_missing(
    db: SqlConnection,
    ledger_ddl: str,
    migrations: list[Migration],
    run_script: Callable[[str], None],
    *,
    upto: int | None = None,
) -> list[int]:
    """Inside the caller's transaction: creates the ledger, applies what is missing, records each; the versions."""
    db.execute(ledger_ddl)
    done = []
    for version, name, sql in missing(applied_versions(db), migrations, upto=upto):
        run_script(sql)
        db.execute(
            "INSERT INTO schema_migrations (version, name, digest, applied_at_ms) VALUES (?, ?, ?, ?)",
            (version, name, checksum(sql), time.time_ns() // 1_000_000),
        )
        done.append(version)
    return done
