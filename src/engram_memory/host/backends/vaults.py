"""The key vault's backends: keys/vault.db beside the keys, or a PostgreSQL database of its own."""

from __future__ import annotations

from pathlib import Path

from engram_memory.engine.ports.host_vault import HostKeyVault, VaultCounts
from engram_memory.host import postgres_home
from engram_memory.host.backends.common import create_private, database_bytes, file_size, postgres_home_errors
from engram_memory.host.language.catalogue import _
from engram_memory.host.settings import HomeError, HostPaths, StoreSettings
from engram_memory.stores.sqlite.vault import SQLiteKeyVault
from engram_memory.stores.sqlite.vault import vault_counts as sqlite_vault_counts


class FileVaultBackend:
    """keys/vault.db beside the key-encryption keys (every SQLite home, and PostgreSQL homes by default)."""

    def __init__(self, paths: HostPaths) -> None:
        self._paths = paths

    def needed_files(self) -> list[Path]:
        return [self._paths.vault_file]

    def install(self, created: list[Path]) -> None:
        create_private(self._paths.vault_file, created)
        SQLiteKeyVault(self._paths.vault_file).close()

    def open(self, *, runtime: bool = False) -> HostKeyVault:
        if not self._paths.vault_file.exists():
            raise HomeError(
                _("no key vault in {keys_dir}: restore keys/vault.db from your key backup").format(
                    keys_dir=self._paths.keys_dir
                )
            )
        return SQLiteKeyVault(self._paths.vault_file)

    def counts(self) -> VaultCounts:
        return sqlite_vault_counts(self._paths.vault_file)

    def sizes(self) -> dict[str, int]:
        file = self._paths.vault_file
        return {"vault_bytes": file_size(file), "vault_wal_bytes": file_size(file.with_name(file.name + "-wal"))}


class PostgresVaultBackend:
    """A PostgreSQL database of its own (`init --vault`), never the store's."""

    def __init__(self, settings: StoreSettings) -> None:
        assert settings.vault is not None
        self._settings = settings
        self._url: str = settings.vault

    def needed_files(self) -> list[Path]:
        return []

    def install(self, created: list[Path]) -> None:
        return None  # migrated and granted with the store, by postgres_home.install

    def open(self, *, runtime: bool = False) -> HostKeyVault:
        from engram_memory.stores.postgres.vault import PostgresKeyVault

        settings = self._settings
        with postgres_home_errors(self._url):
            url = postgres_home.runtime_url(settings, self._url) if runtime else self._url
        with postgres_home_errors(url):
            return PostgresKeyVault(
                url,
                pool_size=settings.pool_size,
                run_migrations=not runtime,
                prepared_statements=settings.prepared_statements,
            )

    def counts(self) -> VaultCounts:
        vault = self.open()
        try:
            return vault.counts()
        finally:
            vault.close()

    def sizes(self) -> dict[str, int]:
        return {"vault_database_bytes": database_bytes(self._url)}
