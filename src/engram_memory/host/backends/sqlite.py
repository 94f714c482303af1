"""The embedded store's backend: one SQLite file in the home's store/ folder."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engram_memory.contract.errors import ContractError
from engram_memory.engine.ports.store import Store
from engram_memory.host.backends.common import create_private, file_size, sync_folder
from engram_memory.host.language.catalogue import _
from engram_memory.host.recovery.manifest import BackupRefused, store_facts
from engram_memory.host.settings import SQLITE_STORE, HomeError, HostPaths
from engram_memory.stores.sqlite.store import SQLiteStore


class SqliteStoreBackend:
    kind = SQLITE_STORE
    runtime_role = False

    def __init__(self, paths: HostPaths) -> None:
        self._paths = paths

    def prepare(self) -> None:
        return None

    def install(self, created: list[Path]) -> None:
        self._paths.store_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        create_private(self._paths.sqlite_file, created)
        SQLiteStore(self._paths.sqlite_file).close()

    def holds_data(self) -> bool:
        if not self._paths.sqlite_file.exists():
            return False
        store = SQLiteStore(self._paths.sqlite_file)
        try:
            return store.holds_data()
        finally:
            store.close()

    def require(self) -> None:
        if not self._paths.sqlite_file.exists():
            raise HomeError(_("no store in {home}: run 'engram-memory init' first").format(home=self._paths.home))

    def open(self, *, runtime: bool = False) -> Store:
        self.require()
        return SQLiteStore(self._paths.sqlite_file)

    def sizes(self) -> dict[str, int]:
        file = self._paths.sqlite_file
        return {"store_bytes": file_size(file), "store_wal_bytes": file_size(file.with_name(file.name + "-wal"))}

    def backup_copy(self) -> SQLiteStore:
        store = SQLiteStore(self._paths.sqlite_file)
        try:
            return store.copy_in_memory()
        finally:
            store.close()

    def refuse_unless_empty(self) -> None:
        file = self._paths.sqlite_file
        if not file.exists():
            return
        try:
            store = SQLiteStore(file)
        except ContractError as exc:
            raise BackupRefused(
                _("RESTORE_REFUSED: {file} is not a readable store ({code}); move store/ away first").format(
                    file=file, code=exc.code.value
                )
            ) from exc
        try:
            with store.inspect() as queries:
                holds_rows = queries.holds_rows()
        finally:
            store.close()
        if holds_rows:
            raise BackupRefused(
                _(
                    "RESTORE_REFUSED: the home's store already holds data; restore only into an empty store (move "
                    "store/ away and keep keys/)"
                )
            )

    def install_restored(self, work: SQLiteStore, expected: dict[str, Any]) -> None:
        """A temporary file beside the store, synced, renamed into place, then read back.

        A stale -wal or -shm of the empty store it replaces is removed first: SQLite would apply it to the
        new file. If the written file does not read back as verified, it is removed again.
        """
        paths = self._paths
        work.vacuum()
        image = work.image()
        paths.store_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.refuse_unless_empty()  # again, just before writing: nothing may have arrived meanwhile
        had_store = paths.sqlite_file.exists()
        temporary = paths.sqlite_file.with_name(paths.sqlite_file.name + ".restore.tmp")
        temporary.unlink(missing_ok=True)  # a killed restore's leftover
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(image)
                handle.flush()
                os.fsync(handle.fileno())
            self._remove_files(("-wal", "-shm"))
            temporary.replace(paths.sqlite_file)
            sync_folder(paths.store_dir)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        try:
            store = SQLiteStore(paths.sqlite_file)
            try:
                with store.inspect() as queries:
                    verified = store_facts(queries) == expected and queries.integrity_ok()
            finally:
                store.close()
        except ContractError:
            verified = False
        if not verified:
            self._remove_files()
            if had_store:
                os.close(os.open(paths.sqlite_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
                SQLiteStore(paths.sqlite_file).close()
            raise BackupRefused(
                _("RESTORE_REFUSED: the written store did not read back as verified; it was removed again")
            )

    def _remove_files(self, suffixes: tuple[str, ...] = ("", "-wal", "-shm")) -> None:
        file = self._paths.sqlite_file
        for suffix in suffixes:
            file.with_name(file.name + suffix).unlink(missing_ok=True)
