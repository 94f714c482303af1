"""Sealing: each body under its own key, bound by AAD to its scope and owner; wrong anything → BLOB_MISSING."""

from __future__ import annotations

import os

import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.keys import StaticKeyRing
from engram_memory.engine.ports import Scope, SealedBody
from engram_memory.engine.sealing import body_aad, open_sealed, seal

RING = StaticKeyRing({"kek-1": os.urandom(32), "kek-2": os.urandom(32)}, "kek-1")
SCOPE = Scope("tenant", "workspace")


def test_sealed_body_opens_with_its_aad() -> None:
    aad = body_aad(SCOPE, "mem_x", "record")
    sealed = seal(RING, b"plaintext", aad)
    assert sealed.kek_id == "kek-1" and b"plaintext" not in sealed.ciphertext
    assert open_sealed(RING, sealed, aad) == b"plaintext"


def test_each_body_gets_its_own_data_key() -> None:
    aad = body_aad(SCOPE, "mem_x", "record")
    assert seal(RING, b"same", aad).wrapped_key != seal(RING, b"same", aad).wrapped_key


@pytest.mark.parametrize(
    "other_aad",
    [
        body_aad(Scope("tenant-b", "workspace"), "mem_x", "record"),
        body_aad(Scope("tenant", "workspace-2"), "mem_x", "record"),
        body_aad(SCOPE, "mem_y", "record"),
        body_aad(SCOPE, "mem_x", "candidate"),
    ],
)
def test_body_does_not_open_under_another_identity(other_aad: bytes) -> None:
    sealed = seal(RING, b"plaintext", body_aad(SCOPE, "mem_x", "record"))
    with pytest.raises(ContractError) as caught:
        open_sealed(RING, sealed, other_aad)
    assert caught.value.code is ErrorCode.BLOB_MISSING


def test_body_does_not_open_with_unknown_or_wrong_kek() -> None:
    aad = body_aad(SCOPE, "mem_x", "record")
    sealed = seal(RING, b"plaintext", aad)
    for broken in (
        SealedBody("kek-9", sealed.wrapped_key, sealed.nonce, sealed.ciphertext),
        SealedBody("kek-2", sealed.wrapped_key, sealed.nonce, sealed.ciphertext),
    ):
        with pytest.raises(ContractError) as caught:
            open_sealed(RING, broken, aad)
        assert caught.value.code is ErrorCode.BLOB_MISSING


def test_key_ring_refuses_bad_keys() -> None:
    with pytest.raises(ValueError):
        StaticKeyRing({"k": b"short"}, "k")
    with pytest.raises(ValueError):
        StaticKeyRing({"k": os.urandom(32)}, "missing")
