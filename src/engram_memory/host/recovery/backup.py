"""Encrypted, self-verifying backups of the store: a manifest of roots and counts, and the snapshot.

The archive holds the store and never the keys: data keys stay in the key vault, so a body whose key
a forget destroys later can never be opened from any backup. The full-text index is stripped from
the copy (its tokens are plaintext no key covers); a restore rebuilds it from the bodies.

A PostgreSQL store is copied, in one consistent snapshot, into the same SQLite snapshot an embedded
store's backup holds: one archive format for both stores, and either store restores either's archive.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engram_memory.contract.canonical import canonical_json
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.instants import format_instant
from engram_memory.engine import journal
from engram_memory.engine.clock import SystemClock
from engram_memory.engine.ports.store import Clock
from engram_memory.host.backends import store_backend
from engram_memory.host.compose import open_vault
from engram_memory.host.keys.files import backup_key
from engram_memory.host.recovery.archive import seal_archive, write_archive
from engram_memory.host.recovery.manifest import (
    MANIFEST_FORMAT,
    MANIFEST_VERSION,
    BackupRefused,
    store_facts,
)
from engram_memory.host.settings import HostPaths
from engram_memory.stores.sqlite.snapshot import SnapshotQueries


@dataclass(frozen=True, slots=True)
class BackupReport:
    path: Path
    archive_bytes: int
    manifest: dict[str, Any]


def check_journals(queries: SnapshotQueries) -> None:
    """Every scope's chain verifies and ends at its recorded head; no event lies outside a chain.

    Raises ContractError CURSOR_GAP or JOURNAL_CORRUPT.
    """
    total = 0
    for scope, head in queries.scope_heads():
        if journal.verify_chain(scope, queries.tx.events(scope)) != head:
            raise ContractError(ErrorCode.JOURNAL_CORRUPT)
        total += head.cursor
    if queries.table_counts().get("journal", 0) != total:
        raise ContractError(ErrorCode.JOURNAL_CORRUPT)


def backup_home(paths: HostPaths, target: Path, *, clock: Clock | None = None) -> BackupReport:
    """Writes an archive of the home's store to `target` (a new file).

    Raises BackupRefused (JOURNAL_CORRUPT, CURSOR_GAP, an existing target), HomeError, KeyFileError,
    ContractError STORE_UNAVAILABLE, OSError.
    """
    backend = store_backend(paths)
    backend.require()
    kek_ids = _kek_ids(paths)
    if target.exists() or target.is_symlink():
        raise BackupRefused(f"{target} already exists: a backup never overwrites a file, choose a new name")
    if not target.parent.is_dir():
        raise BackupRefused(f"{target.parent} is not a folder")
    now_ms = (clock or SystemClock()).now_ms()
    copy = backend.backup_copy()
    try:
        with copy.inspect() as queries:
            try:
                check_journals(queries)
            except ContractError as exc:
                raise BackupRefused(
                    f"{exc.code.value}: the store's journal does not verify; no backup written"
                ) from exc
        copy.strip_derived_index()
        snapshot = copy.image()
        with copy.inspect() as queries:
            facts = store_facts(queries)
    finally:
        copy.close()
    manifest = {
        "format": MANIFEST_FORMAT,
        "format_version": MANIFEST_VERSION,
        "created_at": format_instant(now_ms),
        "store": backend.kind,
        **facts,
        "kek_ids": sorted(kek_ids),
        "snapshot": {"sha256": "sha256:" + hashlib.sha256(snapshot).hexdigest(), "bytes": len(snapshot)},
    }
    archive = seal_archive(canonical_json(manifest), snapshot, lambda salt: backup_key(paths, salt))
    write_archive(target, archive)
    return BackupReport(path=target, archive_bytes=len(archive), manifest=manifest)


def _kek_ids(paths: HostPaths) -> list[str]:
    vault = open_vault(paths)
    try:
        return list(vault.kek_ids())
    finally:
        vault.close()
