"""What the host's own tools need of a key vault beyond the engine's port, for SQLite and PostgreSQL vaults alike.

Rotation re-wraps data keys, statistics count them; neither ever sees a body or a plaintext key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from engram_memory.engine.ports.store import KeyVault, Scope, WrappedKey


@dataclass(frozen=True, slots=True)
class VaultKey:
    """One data key as the vault holds it, for the host's rotation: no body, no plaintext key."""

    owner_id: str
    scope: Scope
    key: WrappedKey


@dataclass(frozen=True, slots=True)
class Rewrap:
    """Move one data key from `old_kek_id` to `key`; applied only if it is still under `old_kek_id`."""

    owner_id: str
    old_kek_id: str
    key: WrappedKey


@dataclass(frozen=True, slots=True)
class VaultCounts:
    keys: int
    destroyed: int


class HostKeyVault(KeyVault, Protocol):
    """A vault as the host path uses it (rotate-keys, stats, backup manifests)."""

    def kek_ids(self) -> dict[str, int]:
        """How many data keys each key-encryption key wraps."""
        ...

    def keys_under(self, kek_ids: Sequence[str], limit: int) -> list[VaultKey]: ...

    def rewrap(self, moves: Sequence[Rewrap]) -> int: ...

    def checkpoint(self) -> bool:
        """Pushes overwritten wraps out of what the vault's files keep, where the vault can."""
        ...

    def counts(self) -> VaultCounts: ...
