"""The server store's backend: PostgreSQL, opened as the owner role or as the runtime role."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from engram_memory.contract.errors import ContractError
from engram_memory.engine.ports.store import Store
from engram_memory.host import postgres_home
from engram_memory.host.backends.common import POSTGRES_STORE, database_bytes, postgres_home_errors
from engram_memory.host.language.catalogue import _
from engram_memory.host.recovery.manifest import BackupRefused, store_facts
from engram_memory.host.settings import HostPaths, StoreSettings
from engram_memory.stores.sqlite.store import IN_MEMORY, SQLiteStore

if TYPE_CHECKING:
    from engram_memory.stores.postgres.store import PostgresStore


class PostgresStoreBackend:
    kind = POSTGRES_STORE
    runtime_role = True

    def __init__(self, paths: HostPaths, settings: StoreSettings) -> None:
        self._paths = paths
        self._settings = settings

    def prepare(self) -> None:
        with postgres_home_errors():
            postgres_home.prepare(self._settings)

    def install(self, created: list[Path]) -> None:
        with postgres_home_errors():
            postgres_home.install(self._settings)

    def holds_data(self) -> bool:
        store = self.owner_store()
        try:
            return store.holds_data()
        finally:
            store.close()

    def require(self) -> None:
        return None

    def open(self, *, runtime: bool = False) -> Store:
        return self._open(runtime=runtime)

    def owner_store(self) -> PostgresStore:
        return self._open(runtime=False)

    def _open(self, *, runtime: bool) -> PostgresStore:
        from engram_memory.stores.postgres.store import PostgresStore

        settings = self._settings
        url, read_urls = settings.store, list(settings.read_urls)
        with postgres_home_errors(url):
            if runtime:
                url = postgres_home.runtime_url(settings, settings.store)
                read_urls = [postgres_home.runtime_url(settings, read_url) for read_url in read_urls]
        with postgres_home_errors(url):
            store = PostgresStore(
                url,
                pool_size=settings.pool_size,
                run_migrations=not runtime,
                read_urls=read_urls,
                direct_url=None if runtime else settings.direct_url,
                prepared_statements=settings.prepared_statements,
            )
        if store.migrated:  # an upgrade added tables: the runtime role needs its privileges on them
            try:
                with postgres_home_errors(url):
                    postgres_home.grant_runtime(settings, vault=False)
            except BaseException:
                store.close()
                raise
        return store

    def sizes(self) -> dict[str, int]:
        return {"store_database_bytes": database_bytes(self._settings.store)}

    def backup_copy(self) -> SQLiteStore:
        """The tables, read in one snapshot, in an embedded store in memory (same schema version)."""
        from engram_memory.stores.postgres.snapshot import ARCHIVED_TABLES

        store = self.owner_store()
        copy = SQLiteStore(IN_MEMORY)
        try:
            with store.inspect() as source, copy.fill() as target:
                for table in ARCHIVED_TABLES:
                    columns = target.columns(table)
                    target.insert_rows(table, columns, source.rows(table, columns))
        except BaseException:
            copy.close()
            raise
        finally:
            store.close()
        return copy

    def refuse_unless_empty(self) -> None:
        try:
            server = self.owner_store()
        except ContractError as exc:
            raise BackupRefused(
                _("RESTORE_REFUSED: the PostgreSQL store is unavailable ({code})").format(code=exc.code.value)
            ) from exc
        try:
            with server.inspect() as target:
                holds_rows = target.holds_rows()
        finally:
            server.close()
        if holds_rows:
            raise BackupRefused(
                _(
                    "RESTORE_REFUSED: the home's store already holds data; restore only into an empty store (a new "
                    "database, initialised with engram-memory init)"
                )
            )

    def install_restored(self, work: SQLiteStore, expected: dict[str, Any]) -> None:
        """One transaction, index included, which checks what it wrote (journal heads and root, record
        root, row counts) before it commits; on any difference it rolls back, and nothing was written."""
        from engram_memory.stores.postgres.snapshot import ARCHIVED_TABLES

        store = self.owner_store()
        try:
            with store.fill() as target, work.inspect() as source:
                if target.holds_rows():  # again, inside the writing transaction: nothing may have arrived
                    raise BackupRefused(_("RESTORE_REFUSED: the home's store already holds data; nothing was written"))
                for table in ARCHIVED_TABLES:
                    columns = source.columns(table)
                    target.insert_rows(table, columns, source.rows(table, columns))
                target.insert_index(source.indexed_fields())
                target.insert_vectors(source.vector_rows())
                target.continue_identities()
                loaded = store_facts(target)
                counts = {name: count for name, count in expected["counts"].items() if name != "schema_migrations"}
                if (loaded["journal"], loaded["records"], loaded["counts"]) != (
                    expected["journal"],
                    expected["records"],
                    counts,
                ):
                    raise BackupRefused(
                        _("RESTORE_REFUSED: the PostgreSQL store did not take the verified state; nothing was written")
                    )
        except ContractError as exc:
            raise BackupRefused(
                _("RESTORE_REFUSED: the PostgreSQL store is unavailable ({code}); nothing was written").format(
                    code=exc.code.value
                )
            ) from exc
        finally:
            store.close()
