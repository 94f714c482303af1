"""Verified restore of a backup archive into a home whose store is empty: the same home, or a fresh
`init` on another machine given the recovery key the archive was made under.

Everything happens on a copy in memory first: every chunk is authenticated, the snapshot is checked
against its manifest, bodies whose data keys were destroyed (in this home's vault, or in the archive's
own log) are erased, each by a journal event signed by the host, the full-text index is rebuilt from
the live bodies, and the whole state is verified, with the archive's keys seen through the home's
vault (overlay.py). Only then is anything written: the vault takes in the archive's keys and logs,
the home takes over the archived home's secrets (adoption.py), and the store is written last, so a
crash leaves at worst keys without bodies and an empty store, and running the restore again finishes.
A PostgreSQL home is filled in one transaction, which commits only once the rows it holds give the
verified state's journal heads, record root and counts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from engram_memory.contract.errors import ContractError
from engram_memory.engine import journal
from engram_memory.engine.clock import SystemClock
from engram_memory.engine.lifecycle.shredded import Settled
from engram_memory.engine.ports.host_vault import AdoptedCounts
from engram_memory.engine.ports.store import Clock, JournalEvent, KeyVault, Scope
from engram_memory.host.backends import store_backend, vault_backend
from engram_memory.host.compose import open_vault, working_engine
from engram_memory.host.keys.files import MacKeys, backup_key, load_keyring, mac_keys_of
from engram_memory.host.keys.recovery import RecoveryKey, RecoveryKeyError, load_recovery_key, shown_key_id
from engram_memory.host.language.catalogue import _
from engram_memory.host.recovery.adoption import Adopted, adopt_home_files
from engram_memory.host.recovery.archive import (
    LEGACY_FORMAT_VERSION,
    ArchiveInvalid,
    Header,
    Opened,
    open_archive,
    read_header,
)
from engram_memory.host.recovery.key_section import KeySection, decode_section
from engram_memory.host.recovery.manifest import (
    CHECKED_SECTIONS,
    LEGACY_MANIFEST_VERSION,
    BackupRefused,
    manifest_heads,
    parse_manifest,
    store_facts,
)
from engram_memory.host.recovery.overlay import RestoringVault
from engram_memory.host.settings import HostPaths
from engram_memory.stores.sqlite.store import IN_MEMORY, SQLiteStore

# Why a restore erased a body: its data key was destroyed (forget, withdraw, admission) after the backup.
RESTORE_REASON = "restore:key-shredded"
_SETTLING_KINDS = frozenset({journal.RECORD_TRANSITIONED, journal.CANDIDATE_WITHDRAWN})
_TEMPORARY_SUFFIX = ".restore.tmp"


@dataclass(frozen=True, slots=True)
class RestoreReport:
    manifest: dict[str, Any]
    settled: Settled
    indexed: int
    records: int
    adopted: Adopted | None  # None for a format-1 archive, which carries no keys
    added: AdoptedCounts | None


def restore_home(
    paths: HostPaths,
    source: Path,
    *,
    decided_by: str,
    recovery_key: RecoveryKey | None = None,
    clock: Clock | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RestoreReport:
    """Restores `source` into the home's empty store; `recovery_key` (else the home's own) opens it.
    `progress(done, total)` follows the re-indexing of its bodies (re-embedding included), the long part.

    Raises BackupRefused (BACKUP_INVALID, RESTORE_REFUSED), HomeError, KeyFileError, OSError.
    """
    backend = store_backend(paths)
    for needed in [paths.kek_file, paths.secret_file, *vault_backend(paths).needed_files()]:
        if not needed.exists():
            raise BackupRefused(
                _(
                    "RESTORE_REFUSED: keys/{name} is missing: run 'engram-memory init' first (on a new machine, "
                    "restore into the fresh home with --recovery-key)"
                ).format(name=needed.name)
            )
    backend.refuse_unless_empty()
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise BackupRefused(
            _("BACKUP_INVALID: cannot read {source}: {strerror}").format(source=source, strerror=exc.strerror)
        ) from exc
    try:
        header = read_header(data)
        key = _archive_key(paths, header, recovery_key)
        opened = open_archive(
            data, lambda _header: key.archive_key(header.salt) if key else backup_key(paths, header.salt)
        )
    except ArchiveInvalid as exc:
        raise BackupRefused(_("BACKUP_INVALID: {exc}").format(exc=exc)) from exc
    manifest = parse_manifest(opened.manifest)
    section = _key_section(paths, opened, manifest, key)
    work = _checked_copy(opened.snapshot, manifest)
    try:
        vault = open_vault(paths)
        try:
            overlay = RestoringVault(vault, section.image if section else None)
            macs = mac_keys_of(section.home.secret_key) if section else None
            settled, indexed = _settle_and_verify(
                paths, work, overlay, macs, decided_by, clock or SystemClock(), progress
            )
            _match_manifest(work, manifest, settled)
            with work.inspect() as queries:
                expected = store_facts(queries)
            added = vault.adopt(overlay.additions()) if section else None
        finally:
            vault.close()
        adopted = adopt_home_files(paths, section.home, recovery_key) if section else None
        backend.install_restored(work, expected)
    finally:
        work.close()
    return RestoreReport(
        manifest=manifest,
        settled=settled,
        indexed=indexed,
        records=expected["records"]["count"],
        adopted=adopted,
        added=added,
    )


def _archive_key(paths: HostPaths, header: Header, given: RecoveryKey | None) -> RecoveryKey | None:
    """The recovery key that opens a format-2 archive (None for format 1, sealed under keys/secret.key).

    Raises ArchiveInvalid naming the key the archive needs, or BackupRefused when there is none to try.
    """
    if header.version == LEGACY_FORMAT_VERSION:
        if given is not None:
            raise BackupRefused(
                _(
                    "RESTORE_REFUSED: this archive predates recovery keys (format 1): restore it without "
                    "--recovery-key, into the home whose keys/ made it"
                )
            )
        return None
    if given is None:
        try:
            given = load_recovery_key(paths)
        except RecoveryKeyError as exc:
            raise BackupRefused(
                _("RESTORE_REFUSED: {exc}; or give the archive's with --recovery-key").format(exc=exc)
            ) from exc
        whose = "this home's recovery key"
    else:
        whose = "the recovery key given"
    if given.key_id_bytes != header.key_id:
        raise ArchiveInvalid(
            f"the archive was made under recovery key {shown_key_id(header.key_id)}, and {whose} is"
            f" {given.key_id}: give the one it was made under with --recovery-key"
        )
    return given


def _key_section(
    paths: HostPaths, opened: Opened, manifest: dict[str, Any], key: RecoveryKey | None
) -> KeySection | None:
    """Raises BackupRefused BACKUP_INVALID when the archive's parts disagree."""
    if manifest["snapshot"] != {
        "sha256": "sha256:" + hashlib.sha256(opened.snapshot).hexdigest(),
        "bytes": len(opened.snapshot),
    }:
        raise BackupRefused(_("BACKUP_INVALID: the snapshot does not match the manifest's digest"))
    legacy = opened.header.version == LEGACY_FORMAT_VERSION
    if legacy != (manifest["format_version"] == LEGACY_MANIFEST_VERSION):
        raise BackupRefused(_("BACKUP_INVALID: the archive's header and manifest are of different formats"))
    if key is None or opened.keys is None:
        return None
    if manifest["keys"]["sha256"] != "sha256:" + hashlib.sha256(opened.keys).hexdigest():
        raise BackupRefused(_("BACKUP_INVALID: the key section does not match the manifest's digest"))
    try:
        return decode_section(opened.keys, key.data_keys_key(opened.header.salt), load_keyring(paths))
    except ArchiveInvalid as exc:
        raise BackupRefused(_("BACKUP_INVALID: {exc}").format(exc=exc)) from exc


def _settle_and_verify(
    paths: HostPaths,
    work: SQLiteStore,
    vault: KeyVault,
    macs: MacKeys | None,
    decided_by: str,
    clock: Clock,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[Settled, int]:
    """The engine over the working copy settles destroyed keys, rebuilds the indexes and verifies it all.

    Returns what was settled and how many records were indexed; raises BackupRefused RESTORE_REFUSED.
    """
    engine = working_engine(paths, work, vault, clock, macs)
    settled = engine.settle_shredded(decided_by=decided_by, reason_ref=RESTORE_REASON)
    rebuilt = engine.rebuild_indexes(progress)
    if rebuilt.unopened:
        raise BackupRefused(
            _(
                "RESTORE_REFUSED: BLOB_MISSING: {unopened} bodies do not open with this home's keys or the archive's "
                "and were not destroyed; nothing was written"
            ).format(unopened=rebuilt.unopened)
        )
    verified = engine.verify(full=True)
    if verified.first is not None:
        _refuse(verified.first.line)
    return settled, rebuilt.indexed


def _checked_copy(snapshot: bytes, manifest: dict[str, Any]) -> SQLiteStore:
    """The snapshot as a store in memory, found equal to its manifest, then migrated to this version."""
    try:
        work = SQLiteStore(IN_MEMORY, image=snapshot, run_migrations=False)
    except ContractError as exc:
        raise BackupRefused(_("BACKUP_INVALID: the snapshot is not a readable store")) from exc
    try:
        with work.inspect() as queries:
            if not queries.integrity_ok():
                raise BackupRefused(_("BACKUP_INVALID: the snapshot fails SQLite's integrity check"))
            facts = store_facts(queries)
            for section in CHECKED_SECTIONS:
                if facts[section] != manifest[section]:
                    raise BackupRefused(
                        _("BACKUP_INVALID: the snapshot's {section} does not match the manifest").format(
                            section=section
                        )
                    )
        # The chains themselves are walked once, by _verify, after the restore's own events are added.
        work.strip_derived_index()  # an archive never carries it; a crafted one must not either
        try:
            work.apply_migrations()
        except ContractError as exc:
            raise BackupRefused(
                _("RESTORE_REFUSED: {code}: the archive's schema ledger").format(code=exc.code.value)
            ) from exc
    except BaseException:
        work.close()
        raise
    return work


def _match_manifest(work: SQLiteStore, manifest: dict[str, Any], settled: Settled) -> None:
    """The verified state is the manifest's: its scopes, each journal up to its head, and its counts,
    changed only by what the settling wrote. (The engine's verifier has checked everything else.)

    Raises BackupRefused RESTORE_REFUSED naming what differs.
    """
    expected_heads = manifest_heads(manifest)
    with work.inspect() as queries:
        heads = dict(queries.scope_heads())
        if set(heads) != set(expected_heads):
            _refuse("the restored scopes differ from the manifest's")
        for scope in heads:
            events = list(queries.tx.events(scope))
            _check_head(scope, events, expected_heads[scope].cursor, expected_heads[scope].digest, settled)
        counts = queries.table_counts()
    archived = manifest["counts"]
    if counts.get("journal") != archived.get("journal", 0) + sum(settled.events.values()):
        _refuse("the journal's size differs from the manifest's plus the restore's own events")
    if counts.get("sealed_bodies") != archived.get("sealed_bodies", 0) - settled.bodies_erased:
        _refuse("the number of bodies differs from the manifest's less those erased")
    for table in ("candidates", "records", "scopes"):
        if counts.get(table) != archived.get(table):
            _refuse(f"the number of rows in {table} differs from the manifest's")


def _check_head(scope: Scope, events: list[JournalEvent], cursor: int, head: str, settled: Settled) -> None:
    """The journal reaches the manifest's head, and only the restore's own events follow it."""
    if len(events) < cursor or (cursor and events[cursor - 1].event_digest != head):
        _refuse(f"the journal of {scope.ref} does not reach the manifest's head")
    after = events[cursor:]
    if len(after) != settled.events.get(scope, 0) or any(
        event.kind not in _SETTLING_KINDS
        or event.body["actor"].get("agent_id") != "host"
        or event.body["data"].get("reason_ref") != RESTORE_REASON
        for event in after
    ):
        _refuse(f"the journal of {scope.ref} goes past the manifest's head with events the restore did not write")


def _refuse(reason: str) -> NoReturn:
    raise BackupRefused(_("RESTORE_REFUSED: {reason}; nothing was written").format(reason=reason))
