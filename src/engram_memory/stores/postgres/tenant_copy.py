"""One tenant's rows, copied from one PostgreSQL store to another and then taken out of the first: the
store's part of `engram-memory tenants move` (host/tenant_move.py says the order).

Every table with a `tenant` column is the tenant's (tests/stores/test_postgres_rls.py keeps that list
honest), copied whole with COPY in PostgreSQL's binary format, ids included: records are keyed by
(tenant, rid) and a rid is the tenant's wherever it lives, so the target's identity only has to continue
past the largest copied. An audit row takes the target's next sequence number. Owner connections only.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from psycopg import sql

from engram_memory.stores.postgres.connection import Connection
from engram_memory.stores.postgres.store import WRITE_LOCK

# Copied without these columns: the target numbers the rows itself.
_RENUMBERED = MappingProxyType({"audit_log": "seq"})


def tenant_tables(connection: Connection) -> list[str]:
    rows = connection.execute(
        "SELECT c.relname FROM pg_class AS c JOIN pg_attribute AS a ON a.attrelid = c.oid"
        " WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')"
        " AND a.attname = 'tenant' AND NOT a.attisdropped ORDER BY 1"
    ).fetchall()
    return [str(row[0]) for row in rows]


def _columns(connection: Connection, table: str) -> list[str]:
    rows = connection.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped"
        " AND attgenerated = '' ORDER BY attnum",
        (table,),
    ).fetchall()
    return [str(row[0]) for row in rows if str(row[0]) != _RENUMBERED.get(table)]


def fence(connection: Connection, tenant: str, moved_to: str, at_ms: int) -> None:
    """From its commit on, no transaction of this store writes for `tenant` (engram_tenant_here raises):
    taken with the write lock held exclusively, so every writer that began before it has committed."""
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        connection.execute(
            "INSERT INTO tenant_moves (moved_tenant, moved_to, moved_at_ms) VALUES (%s, %s, %s)"
            " ON CONFLICT (moved_tenant) DO UPDATE"
            " SET moved_to = excluded.moved_to, moved_at_ms = excluded.moved_at_ms",
            (tenant, moved_to, at_ms),
        )


def unfence(connection: Connection, tenant: str) -> None:
    """The tenant may be written here again (its move failed, or it comes back); inside the caller's transaction."""
    connection.execute("DELETE FROM tenant_moves WHERE moved_tenant = %s", (tenant,))


def row_counts(connection: Connection, tenant: str) -> dict[str, int]:
    counts = {}
    for table in tenant_tables(connection):
        query = sql.SQL("SELECT count(*) FROM {} WHERE tenant = %s").format(sql.Identifier(table))
        row = connection.execute(query, (tenant,)).fetchone()
        counts[table] = int(row[0]) if row else 0
    return counts


def copy_tenant(source: Connection, target: Connection, tenant: str) -> dict[str, int]:
    """Copies the tenant's rows of every table from `source` (read in one snapshot) into `target`, inside
    a transaction of the caller's on `target`; the rows copied, by table."""
    copied: dict[str, int] = {}
    with source.transaction():
        source.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        for table in tenant_tables(source):
            columns = sql.SQL(", ").join(sql.Identifier(name) for name in _columns(source, table))
            out = sql.SQL("COPY (SELECT {} FROM {} WHERE tenant = {}) TO STDOUT (FORMAT BINARY)").format(
                columns, sql.Identifier(table), sql.Literal(tenant)
            )
            into = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(sql.Identifier(table), columns)
            with source.cursor().copy(out) as reading, target.cursor().copy(into) as writing:
                for block in reading:
                    writing.write(block)
            row = target.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE tenant = %s").format(sql.Identifier(table)), (tenant,)
            ).fetchone()
            copied[table] = int(row[0]) if row else 0
    _continue_identities(target)
    return copied


def _continue_identities(connection: Connection) -> None:
    """Past the largest id copied, so the target never hands a copied id out again."""
    rows: list[Any] = connection.execute(
        "SELECT c.relname, a.attname, pg_get_serial_sequence(quote_ident(c.relname), a.attname)"
        " FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid"
        " WHERE c.relnamespace = current_schema()::regnamespace AND a.attidentity <> '' AND NOT a.attisdropped"
    ).fetchall()
    for table, column, sequence in rows:
        query = sql.SQL(
            "SELECT setval(%s::regclass, GREATEST((SELECT max({}) FROM {}), pg_sequence_last_value(%s::regclass), 1))"
        ).format(sql.Identifier(str(column)), sql.Identifier(str(table)))
        connection.execute(query, (sequence, sequence))


def delete_tenant(connection: Connection, tenant: str) -> dict[str, int]:
    """Deletes the tenant's rows of every table, inside the caller's transaction; the rows deleted, by table.

    The journal refuses deletes (a trigger keeps it append-only): the owner lifts that for this
    transaction alone, which locks the journal against every other reader and writer until it ends."""
    deleted = {}
    connection.execute("ALTER TABLE journal DISABLE TRIGGER journal_is_append_only")
    for table in tenant_tables(connection):
        query = sql.SQL("DELETE FROM {} WHERE tenant = %s").format(sql.Identifier(table))
        deleted[table] = connection.execute(query, (tenant,)).rowcount
    connection.execute("ALTER TABLE journal ENABLE TRIGGER journal_is_append_only")
    return deleted


def fenced_copy(connection: Connection, tenant: str) -> bool:
    """Whether this store still holds rows of a tenant that was moved away from it (a move cut short)."""
    row = connection.execute("SELECT EXISTS (SELECT 1 FROM tenant_moves WHERE moved_tenant = %s)", (tenant,)).fetchone()
    return bool(row and row[0]) and any(row_counts(connection, tenant).values())


def drop_tenant(connection: Connection, tenant: str) -> None:
    """Deletes the tenant's rows and asks for the erasure pass that pushes them out of the live files, in
    one transaction of its own (the fence, if any, stays)."""
    with connection.transaction():
        delete_tenant(connection, tenant)
        connection.execute("INSERT INTO erasure_requests DEFAULT VALUES")
