"""Key rotation: every data key re-wrapped under a new key-encryption key, bodies untouched.

Three steps, each safe to cut short: a new KEK becomes active and the old ones are marked retiring
(one atomic replace of keys/kek.json); the vault's data keys still under a retiring KEK move in
batches, one vault transaction each; a retiring KEK leaves kek.json only once no key is under it.
Running it again after a crash finishes the same rotation instead of minting another KEK.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from engram_memory.contract.errors import ContractError
from engram_memory.engine.ports.host_vault import HostKeyVault, Rewrap, VaultKey
from engram_memory.engine.ports.store import WrappedKey
from engram_memory.engine.sealing.keys import StaticKeyRing
from engram_memory.host.compose import open_vault
from engram_memory.host.keys.files import RingFile, new_kek, read_ring_file, write_ring_file
from engram_memory.host.language.catalogue import _
from engram_memory.host.settings import HostPaths

DEFAULT_BATCH_SIZE = 500
LOCK_FILE = "rotate-keys.lock"

Started = Callable[[int], None]  # how many data keys are to move
Moved = Callable[[int], None]  # how many more data keys one batch handled


class RotationRefused(Exception):
    """A rotation that cannot start or go on, with a one-line reason (naming the ErrorCode where one applies)."""


@dataclass(frozen=True, slots=True)
class RotationReport:
    active: str
    retired: tuple[str, ...]
    rewrapped: int
    resumed: bool


def rotate_keys(
    paths: HostPaths,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_start: Started | None = None,
    on_batch: Moved | None = None,
) -> RotationReport:
    """Rotates, or finishes the rotation a crash cut short.

    Raises RotationRefused, HomeError, KeyFileError, ContractError STORE_UNAVAILABLE.
    """
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    vault = open_vault(paths)
    try:
        with _only_rotation(paths):
            ring = read_ring_file(paths)
            unknown = sorted(set(vault.kek_ids()) - set(ring.keys))
            if unknown:
                raise RotationRefused(
                    _(
                        "BLOB_MISSING: the vault holds data keys wrapped by {keys}, which keys/kek.json does not "
                        "hold; nothing was rotated"
                    ).format(keys=", ".join(unknown))
                )
            resumed = bool(ring.retiring)
            if not resumed:
                ring = _begin(paths, ring)
            counts = vault.kek_ids()
            if on_start is not None:
                on_start(sum(counts.get(kek_id, 0) for kek_id in ring.retiring))
            rewrapped = _move_keys(vault, ring, batch_size, on_batch)
            vault.checkpoint()
            if vault.keys_under(ring.retiring, 1):
                raise RotationRefused(_("data keys are still wrapped by a retiring KEK; run rotate-keys again"))
            write_ring_file(
                paths,
                RingFile(
                    active=ring.active,
                    keys={kek_id: key for kek_id, key in ring.keys.items() if kek_id not in ring.retiring},
                ),
            )
    finally:
        vault.close()
    return RotationReport(active=ring.active, retired=ring.retiring, rewrapped=rewrapped, resumed=resumed)


def _begin(paths: HostPaths, ring: RingFile) -> RingFile:
    """Step 1: a new KEK, durable and active before any data key is wrapped by it; every other KEK retiring."""
    kek_id, key = new_kek(ring.keys)
    started = RingFile(active=kek_id, keys={**ring.keys, kek_id: key}, retiring=tuple(sorted(ring.keys)))
    write_ring_file(paths, started)
    return started


def _move_keys(vault: HostKeyVault, ring: RingFile, batch_size: int, on_batch: Moved | None) -> int:
    """Step 2: batches of keys under retiring KEKs, unwrapped with the old and wrapped with the active KEK.

    Each batch commits in one vault transaction, compare-and-set on the old KEK, so a kill loses at
    most one uncommitted batch and a key destroyed meanwhile stays destroyed.
    """
    keys = StaticKeyRing(ring.keys, ring.active)
    moved = 0
    while True:
        batch = vault.keys_under(ring.retiring, batch_size)
        if not batch:
            return moved
        moved += vault.rewrap([_rewrapped(keys, item) for item in batch])
        if on_batch is not None:
            on_batch(len(batch))


def _rewrapped(keys: StaticKeyRing, item: VaultKey) -> Rewrap:
    try:
        data_key = keys.unwrap(item.key.kek_id, item.key.wrapped)
    except ContractError as exc:
        raise RotationRefused(
            _(
                "BLOB_MISSING: the data key of {owner_id} does not open with {kek_id}; the rotation stopped before it "
                "(run rotate-keys again once keys/ is repaired)"
            ).format(owner_id=item.owner_id, kek_id=item.key.kek_id)
        ) from exc
    kek_id, wrapped = keys.wrap(data_key)
    return Rewrap(owner_id=item.owner_id, old_kek_id=item.key.kek_id, key=WrappedKey(kek_id=kek_id, wrapped=wrapped))


@contextmanager
def _only_rotation(paths: HostPaths) -> Iterator[None]:
    """One rotation per home at a time: a second one would mint a KEK the first one never retires."""
    fd = os.open(paths.keys_dir / LOCK_FILE, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise RotationRefused(_("another rotate-keys is running on this home")) from exc
        yield
    finally:
        os.close(fd)
