"""backup and restore: encrypted, self-verifying archives, restored only whole, verified, into an empty store.

A forgotten record's text never comes back into a home that knows the forget: its data key is destroyed
in the vault, whose log of destroyed keys wins over the key an older archive carries, and no archive
holds index tokens of it. (Onto a new machine, an archive older than the forget brings it back: the
limit docs/operations.md states; tests/host/recovery/test_disaster_recovery.py rebuilds whole homes.)

The archive format is the same for both stores. Tests of the archive itself (damage, another home's
archive, refusals) copy one SQLite template home, whose files they compare byte for byte; the tests of
what a restore settles (forgets and withdrawals after the backup, the journal it writes) run on both
stores; tests/host/recovery/test_backup_postgres.py moves archives between the two.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import shutil
import sqlite3
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from engram_memory.contract.canonical import canonical_json, digest
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine import journal
from engram_memory.engine.engine import Engine
from engram_memory.engine.lifecycle.tombstone_guard import forgotten_fingerprints, guard_key
from engram_memory.engine.ports.store import RevocationRow, Scope, SealedBody
from engram_memory.engine.sealing.seal import open_sealed
from engram_memory.host.compose import open_store, open_vault, store_settings
from engram_memory.host.keys.files import load_keyring, load_mac_keys
from engram_memory.host.keys.recovery import load_recovery_key
from engram_memory.host.recovery.archive import CHUNK_BYTES, TAG_BYTES, Opened, open_archive, seal_archive
from engram_memory.host.recovery.manifest import JOURNAL_ROOT_DOMAIN
from engram_memory.host.recovery.restore import RESTORE_REASON, restore_home
from engram_memory.host.settings import HostPaths
from engram_memory.stores.sqlite.vault import SQLiteKeyVault
from tests.host.clirun import assert_one_line_failure, cli, cli_process
from tests.support.homes import bind, engine_for, make_home
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key
from tests.support.postgres import PostgresCluster, owner_url
from tests.support.raw import raw_store, readable_in_store

SCOPE = Scope(tenant="tenant-a", workspace="workspace-1")
TOPICS = [
    ("Deploys need two approvals before the release train leaves.", "deploy approvals"),
    ("The billing database migrates during the Sunday window.", "billing database"),
    ("Hotfix branches are cut from the release tag, never from main.", "hotfix release"),
    ("Quarterly access reviews cover every production role.", "access reviews"),
    ("The search cluster keeps three replicas across zones.", "search replicas"),
    ("Incident retrospectives are written within five working days.", "incident retrospectives"),
]
QUERIES = ["deploy approvals", "billing database", "release", "production role", "replicas zones", "incident"]
HEADER_BYTES = 63


def _remember_corpus(agent: InProcessAgent) -> list[str]:
    ids = []
    for round_number in range(4):
        for text, _ in TOPICS:
            ids.append(agent.remember(f"{text} Note {round_number}.", context=f"round {round_number}"))
    return ids


def _searches(agent: InProcessAgent) -> dict[str, list[str]]:
    return {query: agent.found_ids(query) for query in QUERIES}


def _approve(engine: Engine) -> None:
    engine.approve_confirmation(engine.confirmations()[0][0].confirmation_id, decided_by="host:test", ttl_ms=60_000)


def _wipe_store(paths: HostPaths) -> None:
    shutil.rmtree(paths.store_dir)


def _store_bytes(paths: HostPaths) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(paths.store_dir.rglob("*")) if path.is_file())


def _lose_store(paths: HostPaths, request: pytest.FixtureRequest) -> None:
    """The store is lost, the keys folder is not: SQLite's store folder goes; a PostgreSQL home is pointed
    at a new, empty database (as an operator would after losing the old one) that `init` prepares."""
    settings = store_settings(paths)
    if not settings.is_postgres:
        _wipe_store(paths)
        return
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    fresh = cluster.new_database()
    request.addfinalizer(lambda: cluster.retire_database(fresh))
    paths.config.write_text(replace(settings, store=owner_url(cluster, fresh)).to_toml(), encoding="utf-8")
    done = cli("init", "--home", paths.home, "--json")
    assert done.code == 0, done


def _opened(paths: HostPaths, archive: Path) -> Opened:
    key = load_recovery_key(paths)
    return open_archive(archive.read_bytes(), lambda header: key.archive_key(header.salt))


def _opened_archive(paths: HostPaths, archive: Path) -> tuple[dict[str, object], bytes]:
    opened = _opened(paths, archive)
    return json.loads(opened.manifest), opened.snapshot


def _forged(
    paths: HostPaths, archive: Path, manifest: dict[str, object], snapshot: bytes, keys: bytes | None = None
) -> bytes:
    """The archive sealed again, authentic, around other contents (its header kept, so its carried keys open)."""
    opened = _opened(paths, archive)
    section = opened.keys if keys is None else keys
    assert section is not None
    key = load_recovery_key(paths).archive_key(opened.header.salt)
    return seal_archive(opened.header, [canonical_json(manifest), section, snapshot], key)


def _snapshot_db(snapshot: bytes) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    image = bytearray(snapshot)
    image[18:20] = b"\x01\x01"
    db.deserialize(bytes(image))
    return db


def _backup(paths: HostPaths, archive: Path) -> None:
    done = cli("backup", archive, "--home", paths.home)
    assert done.code == 0, done


def _restore(paths: HostPaths, archive: Path) -> dict[str, object]:
    done = cli("restore", archive, "--home", paths.home, "--json")
    assert done.code == 0, done
    result: dict[str, object] = json.loads(done.stdout)
    return result


@dataclass(frozen=True)
class Backed:
    """A home with 24 records and one pending candidate, and an archive of it taken by `backup`."""

    paths: HostPaths
    archive: Path
    ids: list[str]
    found: dict[str, list[str]]
    pending: str


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Backed:
    folder = tmp_path_factory.mktemp("template")
    paths = make_home(folder / "home")
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        ids = _remember_corpus(agent)
        pending = agent.capture("A draft about the osprey migration route.")["candidate_id"]
        found = _searches(agent)
    assert all(found.values())
    _backup(paths, folder / "engram.backup")
    return Backed(paths, folder / "engram.backup", ids, found, pending)


@pytest.fixture
def backed(template: Backed, tmp_path: Path) -> Backed:
    """A private copy of the template home (keys, store) and of its archive."""
    paths = HostPaths(home=tmp_path / "home")
    shutil.copytree(template.paths.home, paths.home)
    archive = tmp_path / "engram.backup"
    shutil.copy2(template.archive, archive)
    return Backed(paths, archive, template.ids, template.found, template.pending)


# -- the round trip -------------------------------------------------------------------------------------


def test_restore_after_wipe_gives_the_same_search_ids_and_every_body_opens(backed: Backed) -> None:
    paths, archive, ids, found, pending = backed.paths, backed.archive, backed.ids, backed.found, backed.pending
    _wipe_store(paths)
    result = _restore(paths, archive)
    assert result["records"] == len(ids) and result["indexed"] == len(ids)
    assert result["tombstoned"] == [] and result["withdrawn"] == []
    verified = cli("verify", "--json", "--home", paths.home)
    assert verified.code == 0 and json.loads(verified.stdout)["ok"] is True, verified.stdout
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        assert _searches(agent) == found
        for record_id in ids:
            assert agent.get(record_id)["ok"], record_id
        assert agent.admit(pending)["status"] == "accepted"  # the candidate's body opened too


def test_restore_reports_its_progress_through_every_body(backed: Backed) -> None:
    paths, archive = backed.paths, backed.archive
    _wipe_store(paths)
    seen: list[tuple[int, int]] = []
    report = restore_home(
        paths, archive, decided_by="host:test", progress=lambda done, total: seen.append((done, total))
    )
    bodies = len(backed.ids) + 1  # the records and the pending candidate
    assert seen and seen[-1] == (bodies, bodies)
    assert all(total == bodies for _done, total in seen) and [done for done, _ in seen] == sorted(
        done for done, _ in seen
    )
    assert report.indexed == len(backed.ids)


def test_restore_into_a_store_that_init_made_empty_succeeds(backed: Backed) -> None:
    paths, archive, found = backed.paths, backed.archive, backed.found
    _wipe_store(paths)
    assert cli("init", "--home", paths.home).code == 0
    _restore(paths, archive)
    with engine_for(paths) as engine:
        assert _searches(InProcessAgent(engine, bind(paths).binding)) == found


def test_backup_taken_before_a_rotation_restores_with_the_rewrapped_keys(backed: Backed) -> None:
    paths, archive = backed.paths, backed.archive
    assert cli("rotate-keys", "--home", paths.home).code == 0
    _wipe_store(paths)
    _restore(paths, archive)
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        assert _searches(agent) == backed.found
        assert all(agent.get(record_id)["ok"] for record_id in backed.ids)


def test_backup_json_names_the_roots_and_counts_of_the_store(backed: Backed, tmp_path: Path) -> None:
    paths, ids = backed.paths, backed.ids
    done = cli("backup", tmp_path / "b", "--home", paths.home, "--json")
    assert done.code == 0, done
    manifest = json.loads(done.stdout)
    assert manifest["counts"]["records"] == len(ids) and manifest["records"]["count"] == len(ids)
    heads = manifest["journal"]["scopes"]
    assert [(h["tenant"], h["workspace"]) for h in heads] == [(SCOPE.tenant, SCOPE.workspace)]
    assert manifest["journal"]["root"] == digest(JOURNAL_ROOT_DOMAIN, heads)
    assert manifest["kek_ids"] == [load_keyring(paths).active_kek_id]
    data = (tmp_path / "b").read_bytes()
    assert data.startswith(b"ENGRAMBK") and len(data) == manifest["bytes"]
    assert not any(record_id.encode() in data for record_id in ids)  # nothing after the header is plaintext


def test_backup_never_overwrites_a_file(paths: HostPaths, tmp_path: Path) -> None:
    existing = tmp_path / "kept"
    existing.write_bytes(b"an older backup")
    line = assert_one_line_failure(cli("backup", existing, "--home", paths.home))
    assert "already exists" in line
    assert existing.read_bytes() == b"an older backup"


# -- refusals -------------------------------------------------------------------------------------------


def test_restore_into_a_store_that_holds_data_is_refused_and_changes_nothing(backed: Backed) -> None:
    paths, archive = backed.paths, backed.archive
    before = _store_bytes(paths)
    line = assert_one_line_failure(cli("restore", archive, "--home", paths.home))
    assert line.startswith("engram-memory: error: RESTORE_REFUSED: the home's store already holds data")
    assert _store_bytes(paths) == before


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


DAMAGES = {
    "magic": lambda data: _flip(data, 0),
    "salt": lambda data: _flip(data, 20),
    "first-chunk": lambda data: _flip(data, HEADER_BYTES + 5),
    "middle-chunk": lambda data: _flip(data, len(data) // 2),
    "last-byte": lambda data: _flip(data, len(data) - 1),
    "truncated-by-one-byte": lambda data: data[:-1],
    "truncated-at-a-chunk-boundary": lambda data: data[: HEADER_BYTES + 2 * (CHUNK_BYTES + TAG_BYTES)],
    "header-only": lambda data: data[:HEADER_BYTES],
    "trailing-garbage": lambda data: data + b"\x00" * 17,
    "appended-copy-of-a-chunk": lambda data: data + data[HEADER_BYTES : HEADER_BYTES + CHUNK_BYTES + TAG_BYTES],
    "empty-file": lambda data: b"",
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_damaged_archive_is_backup_invalid_and_nothing_is_written(backed: Backed, damage: str) -> None:
    paths, archive = backed.paths, backed.archive
    data = archive.read_bytes()
    assert len(data) > HEADER_BYTES + 3 * (CHUNK_BYTES + TAG_BYTES)  # several chunks, so boundaries are real
    archive.write_bytes(DAMAGES[damage](data))
    _wipe_store(paths)
    line = assert_one_line_failure(cli("restore", archive, "--home", paths.home))
    assert line.startswith("engram-memory: error: BACKUP_INVALID: "), line
    assert not paths.store_dir.exists()


def test_another_homes_archive_is_backup_invalid(backed: Backed, tmp_path: Path) -> None:
    archive = backed.archive
    other = make_home(tmp_path / "other")
    before = _store_bytes(other)
    line = assert_one_line_failure(cli("restore", archive, "--home", other.home))
    assert line.startswith("engram-memory: error: BACKUP_INVALID: the archive was made under recovery key rk-")
    assert f"and this home's recovery key is {load_recovery_key(other).key_id}: give the one it was made under" in line
    assert _store_bytes(other) == before


def test_authentic_archive_whose_snapshot_disagrees_with_its_manifest_is_backup_invalid(
    backed: Backed, tmp_path: Path
) -> None:
    paths, archive = backed.paths, backed.archive
    manifest, snapshot = _opened_archive(paths, archive)
    records = dict(manifest["records"])  # type: ignore[call-overload]
    records["count"] += 1
    forged = tmp_path / "forged.backup"
    forged.write_bytes(_forged(paths, archive, {**manifest, "records": records}, snapshot))
    _wipe_store(paths)
    line = assert_one_line_failure(cli("restore", forged, "--home", paths.home))
    assert "BACKUP_INVALID: the snapshot's records does not match the manifest" in line
    assert not paths.store_dir.exists()


def test_restore_into_a_vault_that_lost_its_keys_takes_them_from_the_archive(backed: Backed) -> None:
    paths, archive = backed.paths, backed.archive
    _wipe_store(paths)
    paths.vault_file.unlink()
    SQLiteKeyVault(paths.vault_file).close()  # a vault of the right shape that never held these keys
    result = _restore(paths, archive)
    assert result["keys_added"] == len(backed.ids) + 1 and result["replaced"] == []
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        assert _searches(agent) == backed.found
        assert all(agent.get(record_id)["ok"] for record_id in backed.ids)


def test_archive_whose_key_section_lacks_the_keys_is_refused_and_leaves_the_home_as_it_was(
    backed: Backed, tmp_path: Path
) -> None:
    paths, archive = backed.paths, backed.archive
    manifest, snapshot = _opened_archive(paths, archive)
    section = json.loads(_opened(paths, archive).keys or b"")
    emptied = canonical_json({**section, "keys": []})
    keys = {**manifest["keys"], "keys": 0, "sha256": "sha256:" + hashlib.sha256(emptied).hexdigest()}  # type: ignore[dict-item]
    forged = tmp_path / "keyless.backup"
    forged.write_bytes(_forged(paths, archive, {**manifest, "keys": keys}, snapshot, keys=emptied))
    _wipe_store(paths)
    paths.vault_file.unlink()
    SQLiteKeyVault(paths.vault_file).close()
    vault_before = paths.vault_file.read_bytes()
    line = assert_one_line_failure(cli("restore", forged, "--home", paths.home))
    assert "RESTORE_REFUSED: BLOB_MISSING: 25 bodies do not open with this home's keys or the archive's" in line
    assert not paths.store_dir.exists()
    assert paths.vault_file.read_bytes() == vault_before


def test_restore_without_the_homes_vault_is_refused(backed: Backed) -> None:
    paths, archive = backed.paths, backed.archive
    _wipe_store(paths)
    paths.vault_file.unlink()
    line = assert_one_line_failure(cli("restore", archive, "--home", paths.home))
    assert "RESTORE_REFUSED: keys/vault.db is missing: run 'engram-memory init' first" in line
    assert not paths.store_dir.exists()


# -- forgetting is final --------------------------------------------------------------------------------


def test_forgotten_record_text_cannot_be_recovered_from_a_backup_taken_before_the_forget(
    paths: HostPaths, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    marker = "zanzibarquux" + secrets.token_hex(4)
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        record_id = agent.remember(f"The {marker} cluster keeps quorum.", context=f"{marker} context")
        neighbour = agent.remember("An unrelated neighbour record keeps the index busy.")
    assert readable_in_store(paths, [marker]) != []  # the live index holds its tokens: this check can fail
    older = tmp_path / "before-forget.backup"
    _backup(paths, older)

    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        args = {"record_id": record_id, "idempotency_key": unique_key("f"), "reason_ref": "r"}
        agent.error_code("engram_memory_forget", args)
        _approve(engine)
        agent.value("engram_memory_forget", args)
    _lose_store(paths, request)
    result = _restore(paths, older)
    assert result["tombstoned"] == [record_id]

    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        assert record_id not in agent.found_ids(marker)
        assert agent.get(record_id)["error"]["code"] == "NOT_FOUND"
        assert agent.found_ids("unrelated neighbour")[:1] == [neighbour]
    with raw_store(paths) as db:
        assert db.one("SELECT state FROM records WHERE record_id = ?", (record_id,)) == ("tombstoned",)
        assert db.count("sealed_bodies", "owner_id = ?", (record_id,)) == 0
        digest = db.value("SELECT payload_digest FROM records WHERE record_id = ?", (record_id,))
        [kept] = forgotten_fingerprints(guard_key(load_mac_keys(paths).cursor), digest, None)
        assert db.count("tombstones", "payload_digest = ?", (kept,)) == 1
        assert db.count("tombstones", "payload_digest = ?", (digest,)) == 0  # keyed, never the plain digest
        last = json.loads(db.value("SELECT body FROM journal ORDER BY cursor DESC LIMIT 1"))
    assert last["kind"] == journal.RECORD_TRANSITIONED and last["actor"]["agent_id"] == "host"
    assert last["data"]["reason_ref"] == RESTORE_REASON and last["data"]["to_state"] == "tombstoned"

    # Neither the archive's bytes, nor its decrypted snapshot, nor any file of the restored store holds the text.
    assert marker.encode() not in older.read_bytes().lower()
    assert readable_in_store(paths, [marker]) == []
    _, snapshot = _opened_archive(paths, older)
    assert marker.encode() not in snapshot.lower()
    archived = _snapshot_db(snapshot)
    for table in ("lexical_index", "lexical_index_postings", "lexical_index_terms"):
        assert archived.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
    row = archived.execute("SELECT nonce, ciphertext FROM sealed_bodies WHERE owner_id = ?", (record_id,)).fetchone()
    assert row is not None  # the ciphertext is in the old archive,
    carried = json.loads(_opened(paths, older).keys or b"")["keys"]
    assert record_id in {entry[0] for entry in carried}  # and so is its key, under the recovery key (the limit),
    assert result["keys_added"] == 0  # but the home that knows the forget never takes it back
    vault = open_vault(paths)
    try:
        assert vault.get(SCOPE, record_id) is None and vault.shredded([record_id]) == {record_id}
        with pytest.raises(ContractError) as caught:
            open_sealed(
                load_keyring(paths), vault, SCOPE, record_id, "record", SealedBody(bytes(row[0]), bytes(row[1]))
            )
        assert caught.value.code is ErrorCode.BLOB_MISSING
    finally:
        vault.close()


def test_restore_withdraws_candidates_whose_keys_were_destroyed_after_the_backup(
    paths: HostPaths, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        withdrawn_later = agent.capture("A draft that the agent withdraws later.")["candidate_id"]
        admitted_later = agent.capture("A draft that policy admits later on.")["candidate_id"]
        kept = agent.capture("A draft that stays pending.")["candidate_id"]
    archive = tmp_path / "engram.backup"
    _backup(paths, archive)
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        args = {"candidate_id": withdrawn_later, "idempotency_key": unique_key("w"), "reason_ref": "r"}
        agent.error_code("engram_memory_withdraw", args)
        _approve(engine)
        agent.value("engram_memory_withdraw", args)
        assert agent.admit(admitted_later)["status"] == "accepted"
    _lose_store(paths, request)
    result = _restore(paths, archive)
    assert sorted(result["withdrawn"]) == sorted([withdrawn_later, admitted_later])  # type: ignore[type-var]
    with raw_store(paths) as db:
        states = {row[0]: row[1] for row in db.rows("SELECT candidate_id, state FROM candidates")}
        bodies = {row[0] for row in db.rows("SELECT owner_id FROM sealed_bodies")}
    assert states == {withdrawn_later: "withdrawn", admitted_later: "withdrawn", kept: "pending"}
    assert bodies == {kept}


def test_restored_journal_verifies_and_folds_into_the_tables(
    paths: HostPaths, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        ids = [agent.remember(f"Fact number {n} about the ledger.") for n in range(3)]
        pending = agent.capture("Pending fact about the ledger.")["candidate_id"]
    archive = tmp_path / "engram.backup"
    _backup(paths, archive)
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        args = {"record_id": ids[0], "idempotency_key": unique_key("f"), "reason_ref": "r"}
        agent.error_code("engram_memory_forget", args)
        _approve(engine)
        agent.value("engram_memory_forget", args)
        args = {"candidate_id": pending, "idempotency_key": unique_key("w"), "reason_ref": "r"}
        agent.error_code("engram_memory_withdraw", args)
        _approve(engine)
        agent.value("engram_memory_withdraw", args)
    _lose_store(paths, request)
    _restore(paths, archive)
    store = open_store(paths)
    with store.read() as tx:
        events = list(tx.events(SCOPE))
        head = tx.head(SCOPE)
    store.close()
    assert journal.verify_chain(SCOPE, events) == head
    folded = journal.fold(events)
    with raw_store(paths) as db:
        assert folded.candidates == {row[0]: row[1] for row in db.rows("SELECT candidate_id, state FROM candidates")}
        assert folded.records == {row[0]: row[1] for row in db.rows("SELECT record_id, state FROM records")}
    assert folded.records[ids[0]] == "tombstoned" and folded.candidates[pending] == "withdrawn"
    assert [event.body["data"]["reason_ref"] for event in events[-2:]] == [RESTORE_REASON, RESTORE_REASON]


def test_authentic_archive_with_a_changed_journal_event_is_restore_refused(backed: Backed, tmp_path: Path) -> None:
    paths, archive = backed.paths, backed.archive
    manifest, snapshot = _opened_archive(paths, archive)
    db = _snapshot_db(snapshot)
    db.execute("DROP TRIGGER journal_is_append_only_update")
    db.execute("UPDATE journal SET body = replace(body, '\"at\":', '\"at\":1') WHERE cursor = 3")
    db.commit()
    changed = db.serialize()
    snapshot_facts = {"sha256": "sha256:" + hashlib.sha256(changed).hexdigest(), "bytes": len(changed)}
    forged = tmp_path / "forged.backup"
    forged.write_bytes(_forged(paths, archive, {**manifest, "snapshot": snapshot_facts}, changed))
    _wipe_store(paths)
    line = assert_one_line_failure(cli("restore", forged, "--home", paths.home))
    assert line == (
        "engram-memory: error: RESTORE_REFUSED: JOURNAL_CORRUPT: the journal of tenant-a/workspace-1 fails at"
        " cursor 3 (its columns disagree with its body); nothing was written"
    )
    assert not paths.store_dir.exists()


def test_revocation_survives_restoring_an_older_backup(tmp_path: Path) -> None:
    """Revocations live beside the keys: a store restored from before a revocation does not undo it."""
    paths = make_home(tmp_path / "home")
    issued = bind(paths)
    with engine_for(paths) as engine:
        InProcessAgent(engine, issued.binding).remember("Kept across the restore.")
    archive = tmp_path / "before-revocation.engram-backup"
    assert cli("backup", archive, "--home", paths.home).code == 0
    with engine_for(paths) as engine:
        engine.deps.vault.revoke(RevocationRow(issued.binding.token_id, 1, "host:test"))
    shutil.rmtree(paths.store_dir)
    assert cli("restore", archive, "--home", paths.home).code == 0
    with engine_for(paths) as engine:
        envelope = engine.handle(
            issued.binding, "engram_memory_search", {"query": "kept", "purpose_ref": issued.binding.purpose_ref}
        )
    assert envelope["error"]["code"] == "AUTHORIZATION_REVOKED"


def _legacy_archive(paths: HostPaths, archive: Path) -> bytes:
    """The archive as format 1 wrote it (before recovery keys): sealed under keys/secret.key, no key section."""
    import os
    import struct

    from engram_memory.host.keys.files import backup_key
    from engram_memory.host.recovery.archive import Header

    manifest, snapshot = _opened_archive(paths, archive)
    legacy = {k: v for k, v in manifest.items() if k not in ("keys", "recovery_key_id")} | {"format_version": 1}
    salt, prefix = os.urandom(32), os.urandom(7)
    raw = struct.pack(">8sHBBI32s7s", b"ENGRAMBK", 1, 1, 1, CHUNK_BYTES, salt, prefix)
    header = Header(raw, 1, CHUNK_BYTES, salt, prefix, b"")
    return seal_archive(header, [canonical_json(legacy), snapshot], backup_key(paths, salt))


def test_format_1_archive_still_restores_into_the_home_that_made_it(backed: Backed, tmp_path: Path) -> None:
    paths = backed.paths
    legacy = tmp_path / "legacy.backup"
    legacy.write_bytes(_legacy_archive(paths, backed.archive))
    _wipe_store(paths)
    keyfile = tmp_path / "recovery.key"
    keyfile.write_text(load_recovery_key(paths).text(), encoding="utf-8")
    line = assert_one_line_failure(cli("restore", legacy, "--recovery-key", keyfile, "--home", paths.home))
    assert "RESTORE_REFUSED: this archive predates recovery keys (format 1)" in line
    result = _restore(paths, legacy)
    assert result["keys_added"] == 0 and result["replaced"] == []
    with engine_for(paths) as engine:
        assert _searches(InProcessAgent(engine, bind(paths).binding)) == backed.found


def test_format_1_archive_of_another_home_names_secret_key(backed: Backed, tmp_path: Path) -> None:
    legacy = tmp_path / "legacy.backup"
    legacy.write_bytes(_legacy_archive(backed.paths, backed.archive))
    other = make_home(tmp_path / "other")
    line = assert_one_line_failure(cli("restore", legacy, "--home", other.home))
    assert "BACKUP_INVALID: the archive does not open with this home's keys/secret.key or was changed" in line


def _damaged_sections() -> dict[str, Any]:
    def key_does_not_unwrap(section: dict[str, Any]) -> dict[str, Any]:
        first = list(section["keys"][0])
        first[4] = base64.b64encode(b"\x00" * 40).decode("ascii")
        return {**section, "keys": [first, *section["keys"][1:]]}

    return {
        "another-format": lambda section: {**section, "format_version": 9},
        "a-key-that-does-not-unwrap": key_does_not_unwrap,
        "a-short-digest-secret": lambda section: {**section, "home": {**section["home"], "secret_key": "AAAA"}},
        "a-signing-key-that-is-not-ed25519": lambda section: {
            **section,
            "home": {
                **section["home"],
                "signing_key": "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            },
        },
        "no-destroyed-log": lambda section: {k: v for k, v in section.items() if k != "destroyed"},
    }


@pytest.mark.parametrize("damage", sorted(_damaged_sections()))
def test_authentic_archive_with_a_damaged_key_section_is_backup_invalid_and_nothing_is_written(
    backed: Backed, tmp_path: Path, damage: str
) -> None:
    paths, archive = backed.paths, backed.archive
    manifest, snapshot = _opened_archive(paths, archive)
    section = _damaged_sections()[damage](json.loads(_opened(paths, archive).keys or b""))
    raw = canonical_json(section)
    keys = {**manifest["keys"], "sha256": "sha256:" + hashlib.sha256(raw).hexdigest()}  # type: ignore[dict-item]
    forged = tmp_path / "forged.backup"
    forged.write_bytes(_forged(paths, archive, {**manifest, "keys": keys}, snapshot, keys=raw))
    _wipe_store(paths)
    keys_before = {p.name: p.read_bytes() for p in paths.keys_dir.iterdir()}
    line = assert_one_line_failure(cli("restore", forged, "--home", paths.home))
    assert line == "engram-memory: error: BACKUP_INVALID: the archive's key section is not one this version reads"
    assert not paths.store_dir.exists()
    assert {p.name: p.read_bytes() for p in paths.keys_dir.iterdir()} == keys_before


def test_key_section_that_disagrees_with_the_manifest_digest_is_backup_invalid(backed: Backed, tmp_path: Path) -> None:
    paths, archive = backed.paths, backed.archive
    manifest, snapshot = _opened_archive(paths, archive)
    section = json.loads(_opened(paths, archive).keys or b"")
    forged = tmp_path / "forged.backup"
    forged.write_bytes(_forged(paths, archive, manifest, snapshot, keys=canonical_json({**section, "issued": []})))
    _wipe_store(paths)
    line = assert_one_line_failure(cli("restore", forged, "--home", paths.home))
    assert line == "engram-memory: error: BACKUP_INVALID: the key section does not match the manifest's digest"


def test_restore_at_a_terminal_shows_a_progress_bar_of_its_re_indexing(backed: Backed) -> None:
    """At a terminal (rich told so by TTY_COMPATIBLE / TTY_INTERACTIVE) the long part shows how far it got;
    through a pipe, stdout stays the result alone."""
    paths, archive = backed.paths, backed.archive
    _wipe_store(paths)
    done = cli_process("restore", archive, "--home", paths.home, env={"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1"})
    assert done.code == 0, done.stderr
    assert "re-indexing bodies" in done.stdout and f"{len(backed.ids) + 1}/{len(backed.ids) + 1}" in done.stdout
    shutil.rmtree(paths.store_dir)
    piped = cli("restore", archive, "--home", paths.home)
    assert piped.code == 0 and "re-indexing" not in piped.stdout and piped.stdout.startswith("restored the backup")
