"""A home whose store is PostgreSQL: checking the URLs and roles, migrating, granting, and opening as either role.

The owner role (the URL in config.toml) migrates and runs the host's commands; the runtime role
(`app_role`, the same URL with another user) serves agent calls behind row-level security. The key
vault is a database of its own (`vault`), or keys/vault.db in the home when none is configured.
psycopg is imported only from here and the PostgreSQL store, never by an embedded home.
"""

from __future__ import annotations

from typing import Any

from engram_memory.contract.errors import ContractError
from engram_memory.host.language.catalogue import _
from engram_memory.host.settings import StoreSettings, is_postgres_url


class PostgresHomeError(Exception):
    """A PostgreSQL URL, role or database that cannot be used as asked (a one-line reason, never a password)."""


def check_url(url: str, option: str) -> None:
    """A postgresql:// URL without a password. Raises PostgresHomeError."""
    from engram_memory.stores.postgres.connection import url_fields

    if not is_postgres_url(url):
        takes = "'sqlite' or a postgresql:// URL" if option == "--store" else "a postgresql:// URL"
        raise PostgresHomeError(_("{option} takes {takes}").format(option=option, takes=takes))
    try:
        fields = url_fields(url)
    except Exception as exc:  # psycopg.ProgrammingError: its message may quote the URL
        raise PostgresHomeError(_("{option} is not a PostgreSQL connection URL").format(option=option)) from exc
    if fields.get("password"):
        raise PostgresHomeError(
            _(
                "{option} must not carry a password (config.toml would keep it): put it in ~/.pgpass, PGPASSFILE or "
                "PGPASSWORD instead"
            ).format(option=option)
        )


def _where(url: str) -> str:
    from engram_memory.stores.postgres.connection import url_fields

    fields = url_fields(url)
    host = fields.get("host") or fields.get("hostaddr") or "localhost"
    return _("database {name} on {host} port {port}").format(
        name=fields.get("dbname") or _("(the default)"), host=host, port=fields.get("port") or 5432
    )


# SQLSTATE classes of a failure to connect: connection exceptions, authorization, no such database,
# the server shutting down or starting. libpq's text for these names the server, never a row.
_CONNECTING = ("08", "28", "3D", "57P")


def connect_failure(url: str, exc: BaseException) -> str | None:
    """Where and why a connection failed, in libpq's words with the URL's password taken out; None
    when `exc` is not a failure to connect (its text might then quote data)."""
    import psycopg

    from engram_memory.stores.postgres.connection import url_fields

    if not isinstance(exc, psycopg.OperationalError):
        return None
    state = exc.sqlstate
    if state is not None and not state.startswith(_CONNECTING):
        return None
    reason = " ".join(str(exc).split()) or type(exc).__name__
    password = url_fields(url).get("password")
    if password:
        reason = reason.replace(str(password), "***")
    return f"{_where(url)}: {reason}"


def _identity(connection: Any) -> tuple[object, ...]:
    """What tells two connections to the same database apart from two databases (server start, port, name)."""
    row = connection.execute(
        "SELECT pg_postmaster_start_time(), current_setting('port'), current_database()"
    ).fetchone()
    return tuple(row)


def prepare(settings: StoreSettings) -> None:
    """Everything `init` checks before it writes a file: both databases reachable as the owner, the
    owner allowed to bypass row-level security, the runtime role safe, the vault apart from the store.

    Raises PostgresHomeError.
    """
    import psycopg

    from engram_memory.stores.postgres.roles import RoleRefused, check_owner, check_runtime_role, open_owner_connection

    try:
        with open_owner_connection(settings.store) as store:
            check_owner(store)
            if settings.app_role is not None:
                check_runtime_role(store, settings.app_role)
            if settings.vault is not None:
                with open_owner_connection(settings.vault) as vault:
                    check_owner(vault)
                    if settings.app_role is not None:
                        check_runtime_role(vault, settings.app_role)
                    holds_journal = vault.execute("SELECT to_regclass('journal') IS NOT NULL").fetchone()
                    if _identity(vault) == _identity(store) or (holds_journal and holds_journal[0]):
                        raise PostgresHomeError(
                            _(
                                "--vault names the store's own database: data keys need a database of their own, so "
                                "that no dump of the store carries them"
                            )
                        )
    except RoleRefused as exc:
        raise PostgresHomeError(str(exc)) from exc
    except psycopg.Error as exc:
        raise PostgresHomeError(
            (
                _("the PostgreSQL server could not be reached as the owner ({store} or the vault): {reason}")
                if settings.vault
                else _("the PostgreSQL server could not be reached as the owner ({store}): {reason}")
            ).format(
                store=_where(settings.store),
                reason=_reason(settings, exc),
            )
        ) from exc


def _reason(settings: StoreSettings, exc: BaseException) -> str:
    for url in (settings.store, settings.vault):
        described = None if url is None else connect_failure(url, exc)
        if described is not None:
            return described.split(": ", 1)[1]
    return type(exc).__name__


def install(settings: StoreSettings) -> None:
    """Applies the migrations as the owner and grants the runtime role exactly what agent calls need.

    Raises ContractError (STORE_UNAVAILABLE, MIGRATION_LEDGER_INVALID), PostgresHomeError.
    """
    from engram_memory.stores.postgres.store import PostgresStore
    from engram_memory.stores.postgres.vault import PostgresKeyVault

    PostgresStore(
        settings.store,
        pool_size=1,
        direct_url=settings.direct_url,
        prepared_statements=settings.prepared_statements,
    ).close()
    if settings.vault is not None:
        PostgresKeyVault(settings.vault, pool_size=1).close()
    grant_runtime(settings)


def grant_runtime(settings: StoreSettings, *, vault: bool = True) -> None:
    """Grants the runtime role exactly what agent calls need in the store (and the vault database, with
    `vault`); none when the home has no runtime role. Run again whenever a migration added a table.
    Raises PostgresHomeError."""
    import psycopg

    from engram_memory.stores.postgres.roles import (
        STORE_GRANTS,
        VAULT_FUNCTIONS,
        VAULT_GRANTS,
        grant,
        open_owner_connection,
    )

    if settings.app_role is None:
        return
    try:
        with open_owner_connection(settings.store) as store:
            grant(store, settings.app_role, STORE_GRANTS)
        if vault and settings.vault is not None:
            with open_owner_connection(settings.vault) as keys:
                grant(keys, settings.app_role, VAULT_GRANTS, VAULT_FUNCTIONS)
    except psycopg.Error as exc:
        raise PostgresHomeError(
            _("the runtime role could not be granted its privileges: {name}").format(name=type(exc).__name__)
        ) from exc


def runtime_url(settings: StoreSettings, url: str) -> str:
    """The URL agent calls connect with: the owner's, with the runtime role as its user."""
    from engram_memory.stores.postgres.connection import with_user

    if settings.app_role is None:
        raise PostgresHomeError(
            _("this home has no runtime role for agent calls: run 'engram-memory init --app-role ROLE' as the owner")
        )
    return with_user(url, settings.app_role)


def schema_behind(exc: ContractError) -> bool:
    from engram_memory.stores.postgres.store import SchemaNotCurrent

    return isinstance(exc, SchemaNotCurrent)
