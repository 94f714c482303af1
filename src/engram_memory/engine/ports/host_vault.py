"""What the host's own tools need of a key vault beyond the engine's port, for SQLite and PostgreSQL vaults alike.

Rotation re-wraps data keys, statistics count them; neither ever sees a body or a plaintext key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from engram_memory.engine.ports.sign_in import SignInStore
from engram_memory.engine.ports.store import IssuedBindingRow, KeyVault, RevocationRow, Scope, WrappedKey


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
class HeldKey:
    """A data key with the time it was put, as a backup carries it."""

    owner_id: str
    scope: Scope
    key: WrappedKey
    created_at_ms: int


@dataclass(frozen=True, slots=True)
class DestroyedKey:
    """One line of the vault's log of destroyed keys: ids and time only."""

    owner_id: str
    scope: Scope
    destroyed_at_ms: int


@dataclass(frozen=True, slots=True)
class VaultImage:
    """What a backup carries of a vault, and what a restore adds to one: keys, and the logs that must
    outlive any store (destroyed keys, revocations, issued bindings)."""

    keys: list[HeldKey]
    destroyed: list[DestroyedKey]
    revocations: list[RevocationRow]
    issued: list[IssuedBindingRow]


@dataclass(frozen=True, slots=True)
class AdoptedCounts:
    keys: int
    destroyed: int
    revocations: int
    issued: int


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

    def image(self) -> VaultImage:
        """Every key, destroyed id, revocation and issued binding, read in one transaction."""
        ...

    def sign_in(self) -> SignInStore:
        """The sign-in tables (people, OAuth clients, grants, codes, refresh tokens, browser sessions)."""
        ...

    def adopt(self, image: VaultImage) -> AdoptedCounts:
        """Adds what the vault lacks of `image`, in one transaction: a key is never added once destroyed
        here or in the image, and nothing the vault holds is replaced. Idempotent; returns what was added."""
        ...
