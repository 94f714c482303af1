"""Key-encryption keys in memory: wraps and unwraps per-body data keys (RFC 3394 AES key wrap).

The keys themselves come from outside the data store (the host's key file), so destroying a wrapped
data key in the store leaves no other copy that this ring could open.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from engram_memory.contract.errors import ContractError, ErrorCode

KEK_BYTES = 32


class StaticKeyRing:
    """A ring of named 256-bit KEKs, one of them active for new wraps."""

    def __init__(self, keys: Mapping[str, bytes], active: str) -> None:
        if active not in keys:
            raise ValueError("the active key-encryption key is not in the ring")
        if any(len(key) != KEK_BYTES for key in keys.values()):
            raise ValueError("key-encryption keys must be 32 bytes")
        self._keys = MappingProxyType(dict(keys))
        self._active = active

    @property
    def active_kek_id(self) -> str:
        return self._active

    def wrap(self, data_key: bytes) -> tuple[str, bytes]:
        return self._active, aes_key_wrap(self._keys[self._active], data_key)

    def unwrap(self, kek_id: str, wrapped: bytes) -> bytes:
        """Raises ContractError BLOB_MISSING when the KEK is unknown or the wrap does not open."""
        key = self._keys.get(kek_id)
        if key is None:
            raise ContractError(ErrorCode.BLOB_MISSING)
        try:
            return aes_key_unwrap(key, wrapped)
        except InvalidUnwrap as exc:
            raise ContractError(ErrorCode.BLOB_MISSING) from exc
