"""The server store's and vault's migrations under the shared ledger (stores/sql/ledger.py).

Each run is one transaction holding an advisory lock, so two processes starting together apply a
migration once; PostgreSQL's DDL is transactional, so a failed migration leaves nothing behind.
"""

from __future__ import annotations

from engram_memory.stores.postgres.connection import Connection, PsycopgConnection
from engram_memory.stores.sql import ledger

PACKAGE = "engram_memory.stores.postgres"
STORE_MIGRATIONS = "migrations"
VAULT_MIGRATIONS = "vault_migrations"
LEDGER_DDL = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
    " digest text NOT NULL, applied_at_ms bigint NOT NULL)"
)
# pg_advisory_xact_lock key that serialises migrations of one database ("engram-m" in ASCII).
MIGRATION_LOCK = 0x656E6772616D2D6D


def bundled(folder: str) -> list[ledger.Migration]:
    return ledger.bundled(PACKAGE, folder)


def migrate(connection: Connection, folder: str, *, upto: int | None = None) -> list[int]:
    """Applies what is missing (autocommit connection, as the owner role); returns the versions applied.

    Raises ContractError MIGRATION_LEDGER_INVALID; psycopg.Error when the server refuses.
    """
    db = PsycopgConnection(connection)

    def run_script(sql: str) -> None:
        connection.execute(sql)  # no parameters: the whole file runs as one multi-statement query

    db.execute("BEGIN")
    try:
        db.execute("SELECT pg_advisory_xact_lock(?)", (MIGRATION_LOCK,))
        done = ledger.apply_missing(db, LEDGER_DDL, bundled(folder), run_script, upto=upto)
        db.execute("COMMIT")
        return done
    except BaseException:
        connection.execute("ROLLBACK")
        raise


def pending(connection: Connection, folder: str) -> list[int]:
    """The versions not applied yet, without changing anything (the runtime role may not migrate).

    Raises ContractError MIGRATION_LEDGER_INVALID when the ledger does not match the bundled files.
    """
    db = PsycopgConnection(connection)
    if not db.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()[0]:
        return [version for version, _, _ in bundled(folder)]
    return [version for version, _, _ in ledger.missing(ledger.applied_versions(db), bundled(folder))]
