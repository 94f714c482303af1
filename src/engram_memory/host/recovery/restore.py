"""Verified restore of a backup archive into a home whose store is empty and whose keys/ folder is its own.

Everything happens on a copy in memory first: every chunk is authenticated, the snapshot is checked
against its manifest, bodies whose data keys were destroyed after the backup are erased (each by a
journal event signed by the host), the full-text index is rebuilt from the live bodies, and the
whole state is verified. Only then is the store file written; nothing is written when any step fails.
A PostgreSQL home is filled in one transaction instead, which commits only once the rows it holds
give the verified state's journal heads, record root and counts.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from engram_memory.contract.errors import ContractError
from engram_memory.contract.states import CandidateState, Operation, RecordState, record_transition
from engram_memory.engine import journal
from engram_memory.engine.clock import SystemClock
from engram_memory.engine.lifecycle.tombstone_guard import forgotten_fingerprints, guard_key
from engram_memory.engine.mutation import append_event_as, host_actor
from engram_memory.engine.ports.store import Clock, JournalEvent, KeyRing, KeyVault, Scope
from engram_memory.engine.projection import add_index_entry
from engram_memory.engine.recall.semantic import VectorCache, embed_record, to_bytes
from engram_memory.engine.sealing.seal import open_sealed
from engram_memory.host.compose import (
    POSTGRES_STORE,
    configured_store,
    open_postgres_store,
    open_vault,
    store_settings,
    vector_cache,
)
from engram_memory.host.keys.files import backup_key, load_keyring, load_mac_keys
from engram_memory.host.recovery.archive import ArchiveInvalid, open_archive
from engram_memory.host.recovery.backup import (
    CHECKED_SECTIONS,
    BackupRefused,
    manifest_heads,
    parse_manifest,
    store_facts,
)
from engram_memory.host.settings import HostPaths
from engram_memory.stores.sqlite.snapshot import SealedOwner
from engram_memory.stores.sqlite.store import IN_MEMORY, SQLiteStore

# Why a restore erased a body: its data key was destroyed (forget, withdraw, admission) after the backup.
RESTORE_REASON = "restore:key-shredded"
_SETTLING_KINDS = frozenset({journal.RECORD_TRANSITIONED, journal.CANDIDATE_WITHDRAWN})
_TEMPORARY_SUFFIX = ".restore.tmp"


@dataclass
class Settled:
    """What the restore did to bodies whose keys were destroyed after the backup."""

    tombstoned: list[str] = field(default_factory=list)
    withdrawn: list[str] = field(default_factory=list)
    bodies_erased: int = 0
    events: dict[Scope, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RestoreReport:
    manifest: dict[str, Any]
    settled: Settled
    indexed: int
    records: int


def restore_home(paths: HostPaths, source: Path, *, decided_by: str, clock: Clock | None = None) -> RestoreReport:
    """Restores `source` into the home's empty store.

    Raises BackupRefused (BACKUP_INVALID, RESTORE_REFUSED), HomeError, KeyFileError.
    """
    kind = configured_store(paths)
    needed_files = [paths.kek_file, paths.secret_file]
    if store_settings(paths).vault is None:
        needed_files.append(paths.vault_file)
    for needed in needed_files:
        if not needed.exists():
            raise BackupRefused(
                f"RESTORE_REFUSED: keys/{needed.name} is missing: a restore needs this home's own keys folder,"
                " which no backup holds"
            )
    refuse_unless_empty(paths)
    try:
        data = source.read_bytes()
    except OSError as exc:
        raise BackupRefused(f"BACKUP_INVALID: cannot read {source}: {exc.strerror}") from exc
    try:
        raw_manifest, snapshot = open_archive(data, lambda salt: backup_key(paths, salt))
    except ArchiveInvalid as exc:
        raise BackupRefused(f"BACKUP_INVALID: {exc}") from exc
    manifest = parse_manifest(raw_manifest)
    if manifest["snapshot"] != {"sha256": "sha256:" + hashlib.sha256(snapshot).hexdigest(), "bytes": len(snapshot)}:
        raise BackupRefused("BACKUP_INVALID: the snapshot does not match the manifest's digest")
    now_ms = (clock or SystemClock()).now_ms()
    work = _checked_copy(snapshot, manifest)
    try:
        keyring = load_keyring(paths)
        vault = open_vault(paths)
        try:
            guard = guard_key(load_mac_keys(paths).cursor)
            settled = _settle_shredded(work, vault, host_actor(decided_by), now_ms, guard)
            indexed = _rebuild_index(work, keyring, vault, vector_cache())
        finally:
            vault.close()
        _verify(work, manifest, settled)
        if kind == POSTGRES_STORE:
            with work.inspect() as queries:
                expected = store_facts(queries)
            _install_postgres(paths, work, expected)
        else:
            work.vacuum()
            image = work.image()
            with work.inspect() as queries:
                expected = store_facts(queries)
    finally:
        work.close()
    if kind != POSTGRES_STORE:
        _install(paths, image, expected)
    return RestoreReport(manifest=manifest, settled=settled, indexed=indexed, records=expected["records"]["count"])


def refuse_unless_empty(paths: HostPaths) -> None:
    """A restore writes only where no store is, or into a store without a single row."""
    if configured_store(paths) == POSTGRES_STORE:
        try:
            server = open_postgres_store(paths)
        except ContractError as exc:
            raise BackupRefused(f"RESTORE_REFUSED: the PostgreSQL store is unavailable ({exc.code.value})") from exc
        try:
            with server.snapshot() as target:
                holds_rows = target.holds_rows()
        finally:
            server.close()
        if holds_rows:
            raise BackupRefused(
                "RESTORE_REFUSED: the home's store already holds data; restore only into an empty store"
                " (a new database, initialised with engram-memory init)"
            )
        return
    if not paths.sqlite_file.exists():
        return
    try:
        store = SQLiteStore(paths.sqlite_file)
    except ContractError as exc:
        raise BackupRefused(
            f"RESTORE_REFUSED: {paths.sqlite_file} is not a readable store ({exc.code.value}); move store/ away first"
        ) from exc
    try:
        with store.inspect() as queries:
            holds_rows = queries.holds_rows()
    finally:
        store.close()
    if holds_rows:
        raise BackupRefused(
            "RESTORE_REFUSED: the home's store already holds data; restore only into an empty store"
            " (move store/ away and keep keys/)"
        )


def _checked_copy(snapshot: bytes, manifest: dict[str, Any]) -> SQLiteStore:
    """The snapshot as a store in memory, found equal to its manifest, then migrated to this version."""
    try:
        work = SQLiteStore(IN_MEMORY, image=snapshot, run_migrations=False)
    except ContractError as exc:
        raise BackupRefused("BACKUP_INVALID: the snapshot is not a readable store") from exc
    try:
        with work.inspect() as queries:
            if not queries.integrity_ok():
                raise BackupRefused("BACKUP_INVALID: the snapshot fails SQLite's integrity check")
            facts = store_facts(queries)
            for section in CHECKED_SECTIONS:
                if facts[section] != manifest[section]:
                    raise BackupRefused(f"BACKUP_INVALID: the snapshot's {section} does not match the manifest")
        # The chains themselves are walked once, by _verify, after the restore's own events are added.
        work.strip_derived_index()  # an archive never carries it; a crafted one must not either
        try:
            work.apply_migrations()
        except ContractError as exc:
            raise BackupRefused(f"RESTORE_REFUSED: {exc.code.value}: the archive's schema ledger") from exc
    except BaseException:
        work.close()
        raise
    return work


def _settle_shredded(work: SQLiteStore, vault: KeyVault, actor: dict[str, str], now_ms: int, guard: bytes) -> Settled:
    """Erases every body whose data key the vault's log says was destroyed, journaling each state change.

    A record becomes tombstoned (its payload digest's fingerprint joins the tombstone list), a pending candidate
    becomes withdrawn: what forget or withdraw would have done, now signed by the host.
    """
    with work.inspect() as queries:
        owners = queries.sealed_owners()
    shredded = vault.shredded([owner.owner_id for owner in owners])
    settled = Settled()
    if not shredded:
        return settled
    with work.write() as tx:
        for owner in owners:
            if owner.owner_id not in shredded:
                continue
            scope = owner.scope
            tx.destroy_body(scope, owner.owner_id)
            settled.bodies_erased += 1
            record = tx.get_record(scope, owner.owner_id) if owner.kind == "record" else None
            candidate = tx.get_candidate(scope, owner.owner_id) if owner.kind == "candidate" else None
            if record is not None and record.state != RecordState.TOMBSTONED.value:
                to_state = record_transition(Operation.TOMBSTONE, RecordState(record.state))
                tx.unindex_record(scope, record.record_id)
                # Its key was shredded: the payload digest is all the guard can remember of it.
                tx.add_tombstone(scope, forgotten_fingerprints(guard, record.payload_digest, None), now_ms)
                data = {
                    "record_id": record.record_id,
                    "operation": Operation.TOMBSTONE.value,
                    "from_state": record.state,
                    "to_state": to_state.value,
                    "reason_ref": RESTORE_REASON,
                }
                event = append_event_as(tx, scope, actor, now_ms, journal.RECORD_TRANSITIONED, data)
                tx.set_record_state(scope, record.record_id, to_state.value, event.cursor)
                settled.tombstoned.append(record.record_id)
            elif candidate is not None and candidate.state == CandidateState.PENDING.value:
                data = {
                    "candidate_id": candidate.candidate_id,
                    "from_state": candidate.state,
                    "to_state": CandidateState.WITHDRAWN.value,
                    "reason_ref": RESTORE_REASON,
                }
                append_event_as(tx, scope, actor, now_ms, journal.CANDIDATE_WITHDRAWN, data)
                tx.update_candidate(
                    scope,
                    candidate.candidate_id,
                    state=CandidateState.WITHDRAWN.value,
                    adjudication=False,
                    record_id=None,
                )
                settled.withdrawn.append(candidate.candidate_id)
            else:
                continue
            settled.events[scope] = settled.events.get(scope, 0) + 1
    return settled


def _rebuild_index(work: SQLiteStore, keyring: KeyRing, vault: KeyVault, semantic: VectorCache | None) -> int:
    """Opens every body left (each must open), indexing the accepted_current records (and embedding them
    when the model is installed). Returns how many."""
    with work.inspect() as queries:
        owners = queries.sealed_owners()
    unopened: list[SealedOwner] = []
    current: list[tuple[Scope, str, dict[str, Any]]] = []
    indexed = 0
    with work.write() as tx:
        for owner in owners:
            sealed = tx.get_body(owner.scope, owner.owner_id)
            if owner.kind == "none" or sealed is None:
                unopened.append(owner)
                continue
            try:
                plaintext = open_sealed(keyring, vault, owner.scope, owner.owner_id, owner.kind, sealed)
            except ContractError:
                unopened.append(owner)
                continue
            if owner.kind == "record" and owner.state == RecordState.ACCEPTED_CURRENT.value:
                payload = json.loads(plaintext)["payload"]
                add_index_entry(tx, owner.scope, owner.owner_id, payload)
                current.append((owner.scope, owner.owner_id, payload))
                indexed += 1
        if semantic is not None:
            model = semantic.embedder.model_id
            for scope, record_id, payload in current:
                embedded = embed_record(semantic, scope, record_id, payload)
                tx.put_vector(scope, record_id, model, to_bytes(embedded.vector), embedded.subject)
    if unopened:
        raise BackupRefused(
            f"RESTORE_REFUSED: BLOB_MISSING: {len(unopened)} bodies do not open with this home's keys and were"
            " not destroyed (keys/ older than the backup, or another home's); nothing was written"
        )
    return indexed


def _verify(work: SQLiteStore, manifest: dict[str, Any], settled: Settled) -> None:
    """The restored state, before it is written: chains, heads, fold, index, bodies and counts.

    Raises BackupRefused RESTORE_REFUSED naming what did not verify.
    """
    expected_heads = manifest_heads(manifest)
    with work.inspect() as queries:
        heads = dict(queries.scope_heads())
        owners = queries.sealed_owners()
        if set(heads) != set(expected_heads):
            _refuse("the restored scopes differ from the manifest's")
        for scope, head in heads.items():
            events = list(queries.tx.events(scope))
            try:
                if journal.verify_chain(scope, events) != head:
                    _refuse(f"JOURNAL_CORRUPT: the head of {scope.ref}")
                folded = journal.fold(events)
            except ContractError as exc:
                _refuse(f"{exc.code.value}: the journal of {scope.ref}")
            _check_head(scope, events, expected_heads[scope].cursor, expected_heads[scope].digest, settled)
            if folded.candidates != queries.candidate_states(scope) or folded.records != queries.record_states(scope):
                _refuse(f"replaying the journal of {scope.ref} does not give its tables")
            current = sum(1 for state in folded.records.values() if state == RecordState.ACCEPTED_CURRENT.value)
            if queries.indexed_count(scope) != current or queries.tx.index_stats(scope).doc_count != current:
                _refuse(f"the rebuilt index of {scope.ref} does not hold exactly its current records")
            _check_bodies(scope, folded, owners)
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


def _check_bodies(scope: Scope, folded: journal.FoldedState, owners: list[SealedOwner]) -> None:
    """Every current record and pending candidate keeps its body; no body is left without an owner."""
    with_body = {owner.owner_id for owner in owners if owner.scope == scope}
    needed = {rid for rid, state in folded.records.items() if state == RecordState.ACCEPTED_CURRENT.value}
    needed |= {cid for cid, state in folded.candidates.items() if state == CandidateState.PENDING.value}
    if needed - with_body:
        _refuse(f"BLOB_MISSING: {len(needed - with_body)} live bodies of {scope.ref} are missing")
    owned = set(folded.records) | set(folded.candidates)
    if with_body - owned:
        _refuse(f"{len(with_body - owned)} bodies of {scope.ref} belong to nothing in its journal")


def _refuse(reason: str) -> NoReturn:
    raise BackupRefused(f"RESTORE_REFUSED: {reason}; nothing was written")


def _install(paths: HostPaths, image: bytes, expected: dict[str, Any]) -> None:
    """Writes the verified store: a temporary file beside it, synced, renamed into place, then read back.

    A stale -wal or -shm of the empty store it replaces is removed first: SQLite would apply it to the
    new file. If the written file does not read back as verified, it is removed again.
    """
    store_dir = paths.store_dir
    store_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    refuse_unless_empty(paths)  # again, just before writing: nothing may have arrived meanwhile
    had_store = paths.sqlite_file.exists()
    temporary = paths.sqlite_file.with_name(paths.sqlite_file.name + _TEMPORARY_SUFFIX)
    temporary.unlink(missing_ok=True)  # a killed restore's leftover
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(image)
            handle.flush()
            os.fsync(handle.fileno())
        _remove_store_files(paths, ("-wal", "-shm"))
        temporary.replace(paths.sqlite_file)
        _sync_folder(store_dir)
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
        _remove_store_files(paths)
        if had_store:
            os.close(os.open(paths.sqlite_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            SQLiteStore(paths.sqlite_file).close()
        raise BackupRefused("RESTORE_REFUSED: the written store did not read back as verified; it was removed again")


def _install_postgres(paths: HostPaths, work: SQLiteStore, expected: dict[str, Any]) -> None:
    """Copies the verified state into the empty PostgreSQL store in one transaction, index included.

    The transaction checks what it wrote (journal heads and root, record root, row counts) before it
    commits; on any difference it rolls back, and nothing was written.
    """
    from engram_memory.stores.postgres.snapshot import ARCHIVED_TABLES

    store = open_postgres_store(paths)
    try:
        with store.load() as target, work.inspect() as source:
            if target.holds_rows():  # again, inside the writing transaction: nothing may have arrived meanwhile
                raise BackupRefused("RESTORE_REFUSED: the home's store already holds data; nothing was written")
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
                    "RESTORE_REFUSED: the PostgreSQL store did not take the verified state; nothing was written"
                )
    except ContractError as exc:
        raise BackupRefused(
            f"RESTORE_REFUSED: the PostgreSQL store is unavailable ({exc.code.value}); nothing was written"
        ) from exc
    finally:
        store.close()


def _remove_store_files(paths: HostPaths, suffixes: tuple[str, ...] = ("", "-wal", "-shm")) -> None:
    for suffix in suffixes:
        paths.sqlite_file.with_name(paths.sqlite_file.name + suffix).unlink(missing_ok=True)


def _sync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
