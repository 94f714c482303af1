"""Sealing: each body under its own key kept in the vault, bound by AAD to scope, owner and kind."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.ports.store import Scope, WrappedKey
from engram_memory.engine.sealing.keys import StaticKeyRing
from engram_memory.engine.sealing.seal import open_sealed, seal
from engram_memory.stores.sqlite.vault import SQLiteKeyVault

RING = StaticKeyRing({"kek-1": os.urandom(32), "kek-2": os.urandom(32)}, "kek-1")
SCOPE = Scope("tenant", "workspace")


@pytest.fixture
def vault(tmp_path: Path) -> Iterator[SQLiteKeyVault]:
    opened = SQLiteKeyVault(tmp_path / "vault.db")
    yield opened
    opened.close()


def test_sealed_body_opens_with_its_identity(vault: SQLiteKeyVault) -> None:
    sealed = seal(RING, vault, SCOPE, "mem_x", "record", b"plaintext", 1)
    assert b"plaintext" not in sealed.ciphertext
    assert open_sealed(RING, vault, SCOPE, "mem_x", "record", sealed) == b"plaintext"
    key = vault.get(SCOPE, "mem_x")
    assert key is not None and key.kek_id == "kek-1"


def test_each_body_gets_its_own_data_key(vault: SQLiteKeyVault) -> None:
    seal(RING, vault, SCOPE, "mem_a", "record", b"same", 1)
    seal(RING, vault, SCOPE, "mem_b", "record", b"same", 1)
    first, second = vault.get(SCOPE, "mem_a"), vault.get(SCOPE, "mem_b")
    assert first is not None and second is not None and first.wrapped != second.wrapped


@pytest.mark.parametrize(
    ("scope", "owner", "kind"),
    [(Scope("tenant-b", "workspace"), "mem_x", "record"), (SCOPE, "mem_x", "candidate")],
)
def test_body_does_not_open_under_another_identity(vault: SQLiteKeyVault, scope: Scope, owner: str, kind: str) -> None:
    sealed = seal(RING, vault, SCOPE, "mem_x", "record", b"plaintext", 1)
    with pytest.raises(ContractError) as caught:
        open_sealed(RING, vault, scope, owner, kind, sealed)
    assert caught.value.code is ErrorCode.BLOB_MISSING


def test_body_moved_to_another_owner_does_not_open(vault: SQLiteKeyVault) -> None:
    sealed = seal(RING, vault, SCOPE, "mem_x", "record", b"plaintext", 1)
    seal(RING, vault, SCOPE, "mem_y", "record", b"other", 1)
    with pytest.raises(ContractError) as caught:
        open_sealed(RING, vault, SCOPE, "mem_y", "record", sealed)
    assert caught.value.code is ErrorCode.BLOB_MISSING


def test_destroyed_key_makes_the_body_unreadable_for_good(vault: SQLiteKeyVault) -> None:
    sealed = seal(RING, vault, SCOPE, "mem_x", "record", b"plaintext", 1)
    assert vault.destroy(["mem_x"], 2) is True
    assert vault.shredded(["mem_x", "mem_y"]) == {"mem_x"}
    with pytest.raises(ContractError) as caught:
        open_sealed(RING, vault, SCOPE, "mem_x", "record", sealed)
    assert caught.value.code is ErrorCode.BLOB_MISSING
    assert vault.destroy(["mem_x"], 3) is True


def test_unknown_or_wrong_kek_is_blob_missing(vault: SQLiteKeyVault) -> None:
    sealed = seal(RING, vault, SCOPE, "mem_x", "record", b"plaintext", 1)
    key = vault.get(SCOPE, "mem_x")
    assert key is not None
    for kek_id, owner in (("kek-9", "mem_9"), ("kek-2", "mem_2")):
        vault.put(SCOPE, owner, WrappedKey(kek_id=kek_id, wrapped=key.wrapped), 1)
        with pytest.raises(ContractError) as caught:
            open_sealed(RING, vault, SCOPE, owner, "record", sealed)
        assert caught.value.code is ErrorCode.BLOB_MISSING


def test_key_ring_refuses_bad_keys() -> None:
    with pytest.raises(ValueError):
        StaticKeyRing({"k": b"short"}, "k")
    with pytest.raises(ValueError):
        StaticKeyRing({"k": os.urandom(32)}, "missing")
