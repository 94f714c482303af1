"""Seals each candidate and record body under its own AES-256-GCM data key (SPEC §11).

The AAD binds tenant, workspace, owner id and schema version, so a body moved to another row or
scope fails to open instead of being served under the wrong identity.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from engram_memory.contract.canonical import canonical_json
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.ports import KeyRing, Scope, SealedBody

BODY_SCHEMA_VERSION = 2
NONCE_BYTES = 12


def body_aad(scope: Scope, owner_id: str, kind: str) -> bytes:
    return canonical_json(
        {
            "tenant": scope.tenant,
            "workspace": scope.workspace,
            "id": owner_id,
            "kind": kind,
            "schema_version": BODY_SCHEMA_VERSION,
        }
    )


def seal(keyring: KeyRing, plaintext: bytes, aad: bytes) -> SealedBody:
    """A fresh data key per body: destroying it later shreds exactly this body and nothing else."""
    data_key = AESGCM.generate_key(bit_length=256)
    nonce = os.urandom(NONCE_BYTES)
    ciphertext = AESGCM(data_key).encrypt(nonce, plaintext, aad)
    kek_id, wrapped = keyring.wrap(data_key)
    return SealedBody(kek_id=kek_id, wrapped_key=wrapped, nonce=nonce, ciphertext=ciphertext)


def open_sealed(keyring: KeyRing, body: SealedBody, aad: bytes) -> bytes:
    """Raises ContractError BLOB_MISSING when the body cannot be opened: never serve a guess."""
    data_key = keyring.unwrap(body.kek_id, body.wrapped_key)
    try:
        return AESGCM(data_key).decrypt(body.nonce, body.ciphertext, aad)
    except InvalidTag as exc:
        raise ContractError(ErrorCode.BLOB_MISSING) from exc
