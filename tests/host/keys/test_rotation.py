"""rotate-keys: every data key re-wrapped under a new key-encryption key, bodies untouched, resumable after a kill."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
import subprocess
import sys

import pytest

from engram_memory.engine.ports.host_vault import Rewrap
from engram_memory.engine.ports.store import Scope, SealedBody, WrappedKey
from engram_memory.engine.sealing.seal import open_sealed
from engram_memory.host.compose import open_vault
from engram_memory.host.keys.files import RingFile, load_keyring, new_kek, read_ring_file, write_ring_file
from engram_memory.host.keys.rotation import LOCK_FILE
from engram_memory.host.settings import HostPaths
from tests.host.clirun import assert_one_line_failure, clean_env, cli
from tests.support.homes import bind, engine_for
from tests.support.inprocess import InProcessAgent
from tests.support.raw import raw_store, raw_vault

SCOPE = Scope(tenant="tenant-a", workspace="workspace-1")


def _fill(paths: HostPaths, records: int, *, pending: int = 0) -> list[str]:
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        ids = agent.remember_many([f"Runbook step {n}: restart the worker pool {n % 7}." for n in range(records)])
        for n in range(pending):
            agent.capture(f"A pending draft number {n}.")
    return ids


def _bodies(paths: HostPaths) -> dict[str, tuple[bytes, bytes]]:
    with raw_store(paths) as db:
        rows = db.rows("SELECT owner_id, nonce, ciphertext FROM sealed_bodies")
    return {row[0]: (bytes(row[1]), bytes(row[2])) for row in rows}


def _vault_keys(paths: HostPaths) -> dict[str, tuple[str, bytes]]:
    with raw_vault(paths) as db:
        rows = db.rows("SELECT owner_id, kek_id, wrapped FROM data_keys")
    return {row[0]: (row[1], bytes(row[2])) for row in rows}


def _open_every_body(paths: HostPaths) -> int:
    """Opens each sealed body with the home's ring and vault; returns how many opened (all, or it raises)."""
    with raw_store(paths) as db:
        records = {row[0] for row in db.rows("SELECT record_id FROM records")}
    ring, vault = load_keyring(paths), open_vault(paths)
    try:
        for owner_id, (nonce, ciphertext) in _bodies(paths).items():
            kind = "record" if owner_id in records else "candidate"
            open_sealed(ring, vault, SCOPE, owner_id, kind, SealedBody(nonce, ciphertext))
    finally:
        vault.close()
    return len(_bodies(paths))


def test_rotation_rewraps_every_key_and_leaves_bodies_byte_identical(paths: HostPaths) -> None:
    ids = _fill(paths, 30, pending=3)
    old_kek = read_ring_file(paths).active
    bodies, keys = _bodies(paths), _vault_keys(paths)
    assert {kek for kek, _ in keys.values()} == {old_kek} and len(keys) == 33

    done = cli("rotate-keys", "--home", paths.home, "--json")
    assert done.code == 0, done
    report = json.loads(done.stdout)
    assert report["retired"] == [old_kek] and report["rewrapped"] == 33 and report["resumed"] is False

    ring = read_ring_file(paths)
    assert ring.active == report["active"] != old_kek
    assert set(ring.keys) == {ring.active} and ring.retiring == ()
    assert stat.S_IMODE(paths.kek_file.stat().st_mode) == 0o600
    assert not paths.kek_file.with_name("kek.json.tmp").exists()
    after = _vault_keys(paths)
    assert set(after) == set(keys)
    assert all(after[owner][0] == ring.active and after[owner][1] != keys[owner][1] for owner in keys)
    assert _bodies(paths) == bodies
    assert _open_every_body(paths) == 33
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        assert all(agent.get(record_id)["ok"] for record_id in ids)


# The full size runs in `make test-slow`; the short one keeps enough batches after the first (which the
# kill follows at once) that the rotation is still unfinished when the kill lands.
@pytest.mark.parametrize(
    ("records", "batch"),
    [pytest.param(300, 5, id="short"), pytest.param(2000, 10, id="full", marks=pytest.mark.slow)],
)
def test_rotation_killed_midway_resumes_with_the_same_new_key_and_every_body_opens(
    paths: HostPaths, records: int, batch: int
) -> None:
    _fill(paths, records)
    old_kek = read_ring_file(paths).active
    bodies = _bodies(paths)
    process = subprocess.Popen(
        [sys.executable, "-m", "engram_memory", "rotate-keys", "--batch-size", str(batch), "--home", str(paths.home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=clean_env(),
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()
    os.kill(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)
    assert first.startswith(f"re-wrapped {batch} of {records} data keys"), first
    assert process.returncode == -signal.SIGKILL

    interrupted = read_ring_file(paths)
    assert interrupted.retiring == (old_kek,) and interrupted.active != old_kek
    under = {kek for kek, _ in _vault_keys(paths).values()}
    assert under == {old_kek, interrupted.active}  # killed mid-way: some keys moved, some not
    assert _open_every_body(paths) == records  # both KEKs are still in the ring while it is unfinished

    done = cli("rotate-keys", "--home", paths.home, "--json", timeout=120)
    assert done.code == 0, done
    report = json.loads(done.stdout)
    assert report["resumed"] is True and report["active"] == interrupted.active and report["retired"] == [old_kek]
    ring = read_ring_file(paths)
    assert set(ring.keys) == {interrupted.active} and ring.retiring == ()
    assert {kek for kek, _ in _vault_keys(paths).values()} == {interrupted.active}
    assert _bodies(paths) == bodies
    assert _open_every_body(paths) == records


def test_interrupted_rotation_is_finished_without_minting_another_key(paths: HostPaths) -> None:
    _fill(paths, 5)
    ring = read_ring_file(paths)
    kek_id, key = new_kek(ring.keys)
    # As a kill right after step 1 leaves it: the new KEK active, the old one retiring, no key moved yet.
    write_ring_file(paths, RingFile(active=kek_id, keys={**ring.keys, kek_id: key}, retiring=(ring.active,)))
    done = cli("rotate-keys", "--home", paths.home)
    assert done.code == 0, done
    assert done.stdout.splitlines()[-1].startswith(f"finished the interrupted rotation: {kek_id} is the active")
    assert set(read_ring_file(paths).keys) == {kek_id}
    assert _open_every_body(paths) == 5


def test_running_engine_reads_and_writes_across_rotations(paths: HostPaths) -> None:
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        first = agent.remember("Written before any rotation.")
        assert cli("rotate-keys", "--home", paths.home).code == 0
        assert agent.get(first)["ok"]  # its key moved to a KEK this engine never loaded
        second = agent.remember("Written after the first rotation.")
        assert _vault_keys(paths)[second][0] == read_ring_file(paths).active
        assert cli("rotate-keys", "--home", paths.home).code == 0
        assert agent.get(first)["ok"] and agent.get(second)["ok"]
        assert agent.found_ids("written rotation") != []


def test_rewrap_leaves_a_key_destroyed_meanwhile_destroyed(paths: HostPaths) -> None:
    vault = open_vault(paths)
    try:
        vault.put(SCOPE, "mem_a", WrappedKey("kek-old", b"\x01" * 40), 1)
        vault.put(SCOPE, "mem_b", WrappedKey("kek-old", b"\x02" * 40), 1)
        read = vault.keys_under(["kek-old"], 10)
        assert [item.owner_id for item in read] == ["mem_a", "mem_b"]
        assert vault.destroy(["mem_a"], 2)
        moves = [Rewrap(item.owner_id, "kek-old", WrappedKey("kek-new", b"\x03" * 40)) for item in read]
        assert vault.rewrap(moves) == 1
        assert vault.get(SCOPE, "mem_a") is None
        assert vault.get(SCOPE, "mem_b") == WrappedKey("kek-new", b"\x03" * 40)
    finally:
        vault.close()


def test_second_rotation_is_refused_while_one_runs(paths: HostPaths) -> None:
    before = paths.kek_file.read_bytes()
    fd = os.open(paths.keys_dir / LOCK_FILE, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        line = assert_one_line_failure(cli("rotate-keys", "--home", paths.home))
    finally:
        os.close(fd)
    assert line == "engram-memory: error: another rotate-keys is running on this home"
    assert paths.kek_file.read_bytes() == before


def test_rotation_refuses_keys_wrapped_by_a_kek_the_ring_lacks(paths: HostPaths) -> None:
    _fill(paths, 2)
    with raw_vault(paths) as db:
        db.execute(
            "UPDATE data_keys SET kek_id = 'kek-lost' WHERE owner_id IN (SELECT owner_id FROM data_keys LIMIT 1)"
        )
    before = paths.kek_file.read_bytes()
    line = assert_one_line_failure(cli("rotate-keys", "--home", paths.home))
    assert "BLOB_MISSING: the vault holds data keys wrapped by kek-lost" in line
    assert paths.kek_file.read_bytes() == before


def test_rotate_keys_prints_one_line_per_batch_through_a_pipe(paths: HostPaths) -> None:
    _fill(paths, 5)
    done = cli("rotate-keys", "--batch-size", "2", "--home", paths.home)
    assert done.code == 0, done
    assert done.stdout.splitlines()[:3] == [
        "re-wrapped 2 of 5 data keys",
        "re-wrapped 4 of 5 data keys",
        "re-wrapped 5 of 5 data keys",
    ]
