"""Seals each candidate and record body under its own AES-256-GCM data key.

The ciphertext goes to the store, the wrapped data key to the key vault. The AAD binds tenant,
workspace, owner id, kind and schema version, so a body moved to another row or scope fails to open
instead of being served under the wrong identity.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from engram_memory.contract.canonical import canonical_json
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.ports.store import KeyRing, KeyVault, Scope, SealedBody, WrappedKey

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


def seal(
    keyring: KeyRing, vault: KeyVault, scope: Scope, owner_id: str, kind: str, plaintext: bytes, at_ms: int
) -> SealedBody:
    """A fresh data key per body, committed to the vault before the body can be committed anywhere.

    Destroying that key later shreds exactly this body, in every copy of the store.
    """
    data_key = AESGCM.generate_key(bit_length=256)
    nonce = os.urandom(NONCE_BYTES)
    ciphertext = AESGCM(data_key).encrypt(nonce, plaintext, body_aad(scope, owner_id, kind))
    kek_id, wrapped = keyring.wrap(data_key)
    vault.put(scope, owner_id, WrappedKey(kek_id=kek_id, wrapped=wrapped), at_ms)
    return SealedBody(nonce=nonce, ciphertext=ciphertext)


def open_sealed(keyring: KeyRing, vault: KeyVault, scope: Scope, owner_id: str, kind: str, body: SealedBody) -> bytes:
    """Raises ContractError BLOB_MISSING when the key is gone or the body does not open: never a guess."""
    key = vault.get(scope, owner_id)
    if key is None:
        raise ContractError(ErrorCode.BLOB_MISSING)
    return open_with_key(keyring, key, scope, owner_id, kind, body)


def open_with_key(keyring: KeyRing, key: WrappedKey, scope: Scope, owner_id: str, kind: str, body: SealedBody) -> bytes:
    """The body opened with its wrapped key, already read. Raises ContractError BLOB_MISSING when it does not open."""
    data_key = keyring.unwrap(key.kek_id, key.wrapped)
    try:
        return AESGCM(data_key).decrypt(body.nonce, body.ciphertext, body_aad(scope, owner_id, kind))
    except InvalidTag as exc:
        raise ContractError(ErrorCode.BLOB_MISSING) from exc
