"""What a backup archive states about its store, and the one refusal backups and restores raise.

Shared by `backup` (which writes a manifest), `restore` (which checks a snapshot against it) and the
store backends (which check that what they installed is what the manifest describes).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from engram_memory.contract.canonical import digest
from engram_memory.engine.ports.store import Scope, ScopeHead

MANIFEST_FORMAT = "engram-memory/backup-manifest"
MANIFEST_VERSION = 2  # 2 adds recovery_key_id and the key section's counts and digest
LEGACY_MANIFEST_VERSION = 1
JOURNAL_ROOT_DOMAIN = "engram-memory/backup-journal-root/v1"
RECORD_ROOT_DOMAIN = "engram-memory/backup-record-root/v1"
# The sections of a manifest that a restore recomputes from the snapshot and must find equal.
CHECKED_SECTIONS = ("schema", "journal", "records", "counts")


class BackupRefused(Exception):
    """A backup or restore that did not happen, with a one-line reason naming the ErrorCode."""


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


def manifest_heads(manifest: dict[str, Any]) -> dict[Scope, ScopeHead]:
    """The journal heads a manifest names (records_cursor is not part of a manifest: 0 here)."""
    return {
        Scope(tenant=item["tenant"], workspace=item["workspace"]): ScopeHead(item["cursor"], item["head_digest"], 0)
        for item in manifest["journal"]["scopes"]
    }


def parse_manifest(raw: bytes) -> dict[str, Any]:
    """Raises BackupRefused BACKUP_INVALID when the manifest is not one this version writes."""
    try:
        manifest = json.loads(raw)
        if not isinstance(manifest, dict):
            raise TypeError("not an object")
        version = manifest.get("format_version")
        if manifest.get("format") != MANIFEST_FORMAT or version not in (LEGACY_MANIFEST_VERSION, MANIFEST_VERSION):
            raise ValueError("another manifest format")
        extra = ("keys", "recovery_key_id") if version == MANIFEST_VERSION else ()
        for section in (*CHECKED_SECTIONS, "snapshot", "created_at", *extra):
            if section not in manifest:
                raise KeyError(section)
        if extra:
            _ = manifest["keys"]["sha256"]
        manifest_heads(manifest)
        manifest["snapshot"]["sha256"], manifest["snapshot"]["bytes"]
    except (ValueError, TypeError, KeyError) as exc:
        raise BackupRefused(_("BACKUP_INVALID: the archive's manifest is not one this version reads")) from exc
    return manifest
