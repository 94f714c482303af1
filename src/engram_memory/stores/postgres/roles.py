"""The two roles a PostgreSQL deployment runs under, checked and granted by `engram-memory init`.

The owner role migrates the schema and runs the host's commands; it must have BYPASSRLS (the host
sees every tenant). The runtime role serves agent calls; it must not (row-level security is its
second wall), must not own the tables, and gets exactly the privileges the agent calls need.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import psycopg
from psycopg import sql

from engram_memory.stores.postgres.connection import Connection

# What agent calls do to each store table (the host's review, maintenance and statistics run as the owner).
STORE_GRANTS: Mapping[str, str] = MappingProxyType(
    {
        "schema_migrations": "SELECT",
        "scopes": "SELECT, INSERT, UPDATE",
        "journal": "SELECT, INSERT",
        "candidates": "SELECT, INSERT, UPDATE",
        "records": "SELECT, INSERT, UPDATE",
        "sealed_bodies": "SELECT, INSERT, DELETE",
        "lexical_index": "SELECT, INSERT, DELETE",
        "lexical_postings": "SELECT, INSERT, DELETE",
        "lexical_terms": "SELECT, INSERT, UPDATE, DELETE",
        "record_vectors": "SELECT, INSERT, DELETE",
        "tombstones": "SELECT, INSERT",
        "record_families": "SELECT, INSERT, DELETE",
        "idempotency": "SELECT, INSERT",
        "confirmations": "SELECT, INSERT, UPDATE",
        "audit_log": "INSERT",
        "erasure_requests": "INSERT",
    }
)
VAULT_GRANTS: Mapping[str, str] = MappingProxyType(
    {
        "schema_migrations": "SELECT",
        "data_keys": "SELECT, INSERT",
        "revocations": "SELECT",
    }
)
VAULT_FUNCTIONS = ("engram_destroy_data_keys(text[], bigint)",)


class RoleRefused(Exception):
    """A role or database that cannot be used as asked, with a one-line reason for the operator."""


def check_owner(connection: Connection) -> None:
    """The connecting role may own an engram-memory database. Raises RoleRefused."""
    row = connection.execute(
        "SELECT current_user, rolsuper OR rolbypassrls, current_setting('server_encoding')"
        " FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    if row is None:
        raise RoleRefused("the connecting role is not a role of this server")
    user, bypasses, encoding = row
    if not bypasses:
        raise RoleRefused(
            f"the owner role {user} needs BYPASSRLS to run the host's commands across tenants"
            f" (ALTER ROLE {user} BYPASSRLS, as a superuser)"
        )
    if encoding != "UTF8":
        raise RoleRefused(f"the database's encoding is {encoding}; engram-memory needs UTF8")


def check_runtime_role(connection: Connection, role: str) -> None:
    """The role may serve agent calls behind row-level security. Raises RoleRefused."""
    row = connection.execute(
        "SELECT rolsuper, rolbypassrls, rolcanlogin, pg_has_role(rolname, current_user, 'MEMBER')"
        " FROM pg_roles WHERE rolname = %s",
        (role,),
    ).fetchone()
    if row is None:
        raise RoleRefused(f"the role {role} does not exist (CREATE ROLE {role} LOGIN, as a superuser)")
    superuser, bypasses, can_login, owns = row
    if superuser or bypasses:
        raise RoleRefused(f"the runtime role {role} bypasses row-level security (superuser or BYPASSRLS)")
    if owns:
        raise RoleRefused(f"the runtime role {role} is the owner role or a member of it")
    if not can_login:
        raise RoleRefused(f"the role {role} cannot log in (ALTER ROLE {role} LOGIN)")


def grant(connection: Connection, role: str, tables: Mapping[str, str], functions: tuple[str, ...] = ()) -> None:
    """Gives `role` exactly these privileges in this database, taking back any others first (one transaction)."""
    who = sql.Identifier(role)
    with connection.transaction():
        schema = sql.Identifier(str(connection.execute("SELECT current_schema()").fetchone()[0]))  # type: ignore[index]
        database = sql.Identifier(str(connection.execute("SELECT current_database()").fetchone()[0]))  # type: ignore[index]
        connection.execute(sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA {} FROM {}").format(schema, who))
        connection.execute(sql.SQL("REVOKE ALL ON ALL SEQUENCES IN SCHEMA {} FROM {}").format(schema, who))
        connection.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, who))
        connection.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, who))
        for table, privileges in tables.items():
            connection.execute(
                sql.SQL("GRANT {} ON TABLE {} TO {}").format(sql.SQL(privileges), sql.Identifier(table), who)
            )
        for function in functions:
            connection.execute(sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(sql.SQL(function), who))


def open_owner_connection(url: str) -> Connection:
    """A plain connection for init's checks and grants. Raises psycopg.Error."""
    return psycopg.connect(url, autocommit=True, connect_timeout=10)
