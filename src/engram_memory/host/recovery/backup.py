"""Encrypted, self-verifying backups of the store (SPEC §12): a manifest of roots and counts, and the snapshot.

The archive holds the store and never the keys: data keys stay in the key vault, so a body whose key
a forget destroys later can never be opened from any backup. The full-text index is stripped from
the copy (its tokens are plaintext no key covers); a restore rebuilds it from the bodies.

A PostgreSQL store is copied, in one consistent snapshot, into the same SQLite snapshot an embedded
store's backup holds: one archive format for both stores, and either store restores either's archive.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from engram_memory.contract.canonical import canonical_json, digest
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.instants import format_instant
from engram_memory.engine import journal
from engram_memory.engine.clock import SystemClock
from engram_memory.engine.ports.store import Clock, Scope, ScopeHead
from engram_memory.host.compose import (
    POSTGRES_STORE,
    HomeError,
    configured_store,
    open_postgres_store,
    open_vault,
)
from engram_memory.host.keys.files import backup_key
from engram_memory.host.recovery.archive import seal_archive, write_archive
from engram_memory.host.settings import HostPaths
from engram_memory.stores.sqlite.snapshot import SnapshotQueries
from engram_memory.stores.sqlite.store import IN_MEMORY, SQLiteStore

MANIFEST_FORMAT = "engram-memory/backup-manifest"
MANIFEST_VERSION = 1
JOURNAL_ROOT_DOMAIN = "engram-memory/backup-journal-root/v1"
RECORD_ROOT_DOMAIN = "engram-memory/backup-record-root/v1"
# The sections of a manifest that a restore recomputes from the snapshot and must find equal.
CHECKED_SECTIONS = ("schema", "journal", "records", "counts")


class BackupRefused(Exception):
    """A backup or restore that did not happen, with a one-line reason naming the ErrorCode (SPEC §13)."""


@dataclass(frozen=True, slots=True)
class BackupReport:
    path: Path
    archive_bytes: int
    manifest: dict[str, Any]


class FactSource(Protocol):
    """What a manifest's facts are read from: an embedded store's snapshot, or a PostgreSQL store being filled."""

    def schema_ledger(self) -> list[tuple[int, str, str]]: ...
    def scope_heads(self) -> list[tuple[Scope, ScopeHead]]: ...
    def record_digests(self) -> list[tuple[str, str, str]]: ...
    def table_counts(self) -> dict[str, int]: ...


def store_facts(queries: FactSource) -> dict[str, Any]:
    """What a manifest states about a store: schema ledger, journal heads and root, record root, counts."""
    heads = [
        {"tenant": scope.tenant, "workspace": scope.workspace, "cursor": head.cursor, "head_digest": head.digest}
        for scope, head in queries.scope_heads()
    ]
    records = [list(row) for row in queries.record_digests()]
    return {
        "schema": [{"version": v, "name": name, "digest": d} for v, name, d in queries.schema_ledger()],
        "journal": {"scopes": heads, "root": digest(JOURNAL_ROOT_DOMAIN, heads)},
        "records": {"count": len(records), "root": digest(RECORD_ROOT_DOMAIN, records)},
        "counts": queries.table_counts(),
    }


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


def manifest_heads(manifest: dict[str, Any]) -> dict[Scope, ScopeHead]:
    """The journal heads a manifest names (records_cursor is not part of a manifest: 0 here)."""
    return {
        Scope(tenant=item["tenant"], workspace=item["workspace"]): ScopeHead(item["cursor"], item["head_digest"], 0)
        for item in manifest["journal"]["scopes"]
    }


def backup_home(paths: HostPaths, target: Path, *, clock: Clock | None = None) -> BackupReport:
    """Writes an archive of the home's store to `target` (a new file).

    Raises BackupRefused (JOURNAL_CORRUPT, CURSOR_GAP, an existing target), HomeError, KeyFileError,
    ContractError STORE_UNAVAILABLE, OSError.
    """
    kind = configured_store(paths)
    if kind != POSTGRES_STORE and not paths.sqlite_file.exists():
        raise HomeError(f"no store in {paths.home}: run 'engram-memory init' first")
    kek_ids = _kek_ids(paths)
    if target.exists() or target.is_symlink():
        raise BackupRefused(f"{target} already exists: a backup never overwrites a file, choose a new name")
    if not target.parent.is_dir():
        raise BackupRefused(f"{target.parent} is not a folder")
    now_ms = (clock or SystemClock()).now_ms()
    copy = _postgres_copy(paths) if kind == POSTGRES_STORE else _sqlite_copy(paths)
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
        "store": kind,
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


def _sqlite_copy(paths: HostPaths) -> SQLiteStore:
    store = SQLiteStore(paths.sqlite_file)
    try:
        return store.copy_in_memory()
    finally:
        store.close()


def _postgres_copy(paths: HostPaths) -> SQLiteStore:
    """The PostgreSQL store's tables, read in one snapshot, in an embedded store in memory (same schema version)."""
    from engram_memory.stores.postgres.snapshot import ARCHIVED_TABLES

    store = open_postgres_store(paths)
    copy = SQLiteStore(IN_MEMORY)
    try:
        with store.snapshot() as source, copy.fill() as target:
            for table in ARCHIVED_TABLES:
                columns = target.columns(table)
                target.insert_rows(table, columns, source.rows(table, columns))
    except BaseException:
        copy.close()
        raise
    finally:
        store.close()
    return copy


def parse_manifest(raw: bytes) -> dict[str, Any]:
    """Raises BackupRefused BACKUP_INVALID when the manifest is not one this version writes."""
    try:
        manifest = json.loads(raw)
        if not isinstance(manifest, dict):
            raise TypeError("not an object")
        if manifest.get("format") != MANIFEST_FORMAT or manifest.get("format_version") != MANIFEST_VERSION:
            raise ValueError("another manifest format")
        for section in (*CHECKED_SECTIONS, "snapshot", "created_at"):
            if section not in manifest:
                raise KeyError(section)
        manifest_heads(manifest)
        _ = manifest["snapshot"]["sha256"], manifest["snapshot"]["bytes"]
    except (ValueError, TypeError, KeyError) as exc:
        raise BackupRefused("BACKUP_INVALID: the archive's manifest is not one this version reads") from exc
    return manifest
