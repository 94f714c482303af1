"""One object per kind of store, and per kind of key vault, a home can use: picked once from config.toml.

Everything that differs between the embedded SQLite store and PostgreSQL lives in this package: how a
store is checked and created by `init`, opened as the owner or the runtime role, measured for `stats`,
copied for a backup and filled by a restore. The rest of the host asks a backend, never which kind it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from engram_memory.engine.ports.host_vault import HostKeyVault, VaultCounts
from engram_memory.engine.ports.store import Store
from engram_memory.host import postgres_home
from engram_memory.host.backends.common import POSTGRES_STORE, postgres_home_errors
from engram_memory.host.backends.postgres import PostgresStoreBackend
from engram_memory.host.backends.sqlite import SqliteStoreBackend
from engram_memory.host.backends.vaults import FileVaultBackend, PostgresVaultBackend
from engram_memory.host.language.catalogue import _
from engram_memory.host.postgres_home import PostgresHomeError
from engram_memory.host.settings import (
    SQLITE_STORE,
    HomeError,
    HostPaths,
    StoreSettings,
    is_postgres_url,
    store_settings,
)
from engram_memory.stores.sqlite.store import SQLiteStore


class StoreBackend(Protocol):
    kind: str
    # Whether agents' calls run under a role of their own (PostgreSQL's runtime role, confined by
    # row-level security); on SQLite there is no role to separate.
    runtime_role: bool

    def prepare(self) -> None:
        """Checks made before `init` writes a single file."""

    def install(self, created: list[Path]) -> None:
        """Creates (or migrates) the store; files made are appended to `created`."""

    def holds_data(self) -> bool:
        """Whether a store exists and holds any row (False when there is none yet)."""

    def require(self) -> None:
        """Raises HomeError when the home has no store to open."""

    def open(self, *, runtime: bool = False) -> Store:
        """The store as the owner (migrating what is missing) or as the runtime role."""

    def sizes(self) -> dict[str, int]:
        """Bytes on disk (0 when unknown), named for `stats`."""

    def backup_copy(self) -> SQLiteStore:
        """The whole store, read in one snapshot, as an embedded store in memory (the archive's format)."""

    def refuse_unless_empty(self) -> None:
        """Raises BackupRefused RESTORE_REFUSED unless the store is missing or holds not a single row."""

    def install_restored(self, work: SQLiteStore, expected: dict[str, Any]) -> None:
        """Writes a verified working copy into the home's store; nothing is written when any check fails."""


class VaultBackend(Protocol):
    def needed_files(self) -> list[Path]: ...
    def install(self, created: list[Path]) -> None: ...
    def open(self, *, runtime: bool = False) -> HostKeyVault: ...
    def counts(self) -> VaultCounts: ...
    def sizes(self) -> dict[str, int]: ...


def store_backend(paths: HostPaths, settings: StoreSettings | None = None) -> StoreBackend:
    """The home's store backend. Raises HomeError when config.toml cannot be read."""
    settings = settings or store_settings(paths)
    if settings.is_postgres:
        return PostgresStoreBackend(paths, settings)
    return SqliteStoreBackend(paths)


def vault_backend(paths: HostPaths, settings: StoreSettings | None = None) -> VaultBackend:
    settings = settings or store_settings(paths)
    if settings.vault is None:
        return FileVaultBackend(paths)
    return PostgresVaultBackend(settings)


def wanted_settings(
    paths: HostPaths,
    store: str | None,
    app_role: str | None,
    vault: str | None,
    *,
    read_urls: Sequence[str] | None = None,
    direct_url: str | None = None,
) -> StoreSettings:
    """What the home should use: its config.toml, with what this init adds; conflicts are refused.

    The one place that reads which kind a `--store` or `--vault` value names; raises HomeError.
    """
    if store is not None and store != SQLITE_STORE and not is_postgres_url(store):
        raise HomeError(_("--store takes 'sqlite' or a postgresql:// URL"))
    given = [(store, "--store"), (vault, "--vault"), (direct_url, "--direct-url")]
    given += [(url, "--read-url") for url in read_urls or ()]
    for value, option in given:
        if value is not None and (is_postgres_url(value) or option in ("--direct-url", "--read-url")):
            try:
                postgres_home.check_url(value, option)
            except PostgresHomeError as exc:
                raise HomeError(str(exc)) from exc
    if paths.config.exists():
        current = store_settings(paths)
        if store is not None and store != current.store:
            raise HomeError(_("this home already uses the store '{store}'").format(store=shown_store(current.store)))
    else:
        current = StoreSettings(store=store or SQLITE_STORE)
    if not current.is_postgres and (app_role is not None or vault is not None or read_urls or direct_url):
        raise HomeError(_("--app-role, --vault, --read-url and --direct-url apply to a PostgreSQL store only"))
    if app_role is not None and current.app_role not in (None, app_role):
        raise HomeError(_("this home's runtime role is already '{app_role}'").format(app_role=current.app_role))
    if vault is not None and current.vault not in (None, vault):
        raise HomeError(_("this home's key vault is already another database"))
    if vault is not None and current.vault is None and paths.config.exists():
        raise HomeError(_("this home keeps its data keys in keys/vault.db: a vault database cannot be added later"))
    wanted = replace(current, app_role=app_role or current.app_role, vault=vault or current.vault)
    if read_urls is not None:
        wanted = replace(wanted, read_urls=tuple(read_urls))
    return wanted if direct_url is None else replace(wanted, direct_url=direct_url)


def shown_store(store: str) -> str:
    """A store setting as messages may name it: never a URL, which can carry a password."""
    return store if store == SQLITE_STORE else POSTGRES_STORE


__all__ = [
    "POSTGRES_STORE",
    "StoreBackend",
    "VaultBackend",
    "postgres_home_errors",
    "shown_store",
    "store_backend",
    "vault_backend",
    "wanted_settings",
]
