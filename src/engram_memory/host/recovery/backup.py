"""Encrypted, self-verifying backups: a manifest of roots and counts, the key section, and the snapshot.

An archive is sealed under the home's recovery key, and carries what a restore on another machine needs
besides that key (host/recovery/key_section.py): the data keys of its bodies, the vault's logs and the
home's secrets. A data key a forget destroys later therefore lives on in archives made before the forget,
until they are deleted or the recovery key they were made under is rotated away (docs/operations.md).
The full-text index is stripped from the copy (its tokens are plaintext no key covers); a restore
rebuilds it from the bodies.

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
from engram_memory.engine.ports.host_vault import VaultImage
from engram_memory.engine.ports.store import Clock
from engram_memory.host.backends import store_backend
from engram_memory.host.compose import open_vault
from engram_memory.host.keys.files import KeyFileError, load_keyring
from engram_memory.host.keys.recovery import create_recovery_key, load_recovery_key
from engram_memory.host.language.catalogue import _
from engram_memory.host.recovery.archive import new_header, seal_archive, write_archive
from engram_memory.host.recovery.key_section import HomeFiles, encode_section
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
    recovery_key_created: bool  # the home had no recovery key: this backup made one, not exported yet
    keyless_bodies: int  # archived bodies whose data key the vault lacks (damage `verify` names)


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
    """Writes an archive of the home to `target` (a new file), sealed under the home's recovery key.

    The store is copied first and the vault read after: a key destroyed in between is in the copied
    log, so a restore erases its body as the forget did. (A candidate admitted in between comes back
    withdrawn, for the same reason: its key was retired.)

    Raises BackupRefused (JOURNAL_CORRUPT, CURSOR_GAP, an existing target), HomeError, KeyFileError,
    RecoveryKeyError, ContractError STORE_UNAVAILABLE, OSError.
    """
    backend = store_backend(paths)
    backend.require()
    if target.exists() or target.is_symlink():
        raise BackupRefused(
            _("{target} already exists: a backup never overwrites a file, choose a new name").format(target=target)
        )
    if not target.parent.is_dir():
        raise BackupRefused(_("{parent} is not a folder").format(parent=target.parent))
    created = create_recovery_key(paths)
    recovery, keyring, home = load_recovery_key(paths), load_keyring(paths), home_files(paths)
    now_ms = (clock or SystemClock()).now_ms()
    copy = backend.backup_copy()
    try:
        with copy.inspect() as queries:
            try:
                check_journals(queries)
            except ContractError as exc:
                raise BackupRefused(
                    _("{code}: the store's journal does not verify; no backup written").format(code=exc.code.value)
                ) from exc
            owners = {owner.owner_id for owner in queries.tx.sealed_owners()}
        copy.strip_derived_index()
        snapshot = copy.image()
        with copy.inspect() as queries:
            facts = store_facts(queries)
    finally:
        copy.close()
    image, kek_ids = _vault_image(paths)
    header = new_header(recovery.key_id_bytes)
    try:
        section, counts = encode_section(image, owners, keyring, recovery.data_keys_key(header.salt), home)
    except ContractError as exc:
        raise BackupRefused(
            _("{code}: a data key does not open with keys/kek.json; no backup written").format(code=exc.code.value)
        ) from exc
    destroyed = {gone.owner_id for gone in image.destroyed}
    keyless = len(owners - {held.owner_id for held in image.keys} - destroyed)
    manifest = {
        "format": MANIFEST_FORMAT,
        "format_version": MANIFEST_VERSION,
        "created_at": format_instant(now_ms),
        "store": backend.kind,
        **facts,
        "kek_ids": sorted(kek_ids),
        "recovery_key_id": recovery.key_id,
        "keys": {**counts, "sha256": "sha256:" + hashlib.sha256(section).hexdigest()},
        "snapshot": {"sha256": "sha256:" + hashlib.sha256(snapshot).hexdigest(), "bytes": len(snapshot)},
    }
    archive = seal_archive(header, [canonical_json(manifest), section, snapshot], recovery.archive_key(header.salt))
    write_archive(target, archive)
    return BackupReport(
        path=target,
        archive_bytes=len(archive),
        manifest=manifest,
        recovery_key_created=created,
        keyless_bodies=keyless,
    )


def home_files(paths: HostPaths) -> HomeFiles:
    """Raises KeyFileError when a file cannot be read."""
    try:
        return HomeFiles(
            secret_key=paths.secret_file.read_bytes(),
            signing_key_pem=paths.signing_key_file.read_bytes(),
            policy_toml=paths.policy.read_text(encoding="utf-8"),
        )
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(_("cannot read keys/secret.key, keys/host-signing.pem or policy.toml")) from exc


def _vault_image(paths: HostPaths) -> tuple[VaultImage, list[str]]:
    vault = open_vault(paths)
    try:
        return vault.image(), list(vault.kek_ids())
    finally:
        vault.close()
