"""The key vault a restore verifies against: the home's vault, seen through the keys an archive carries.

Nothing is written while the restore checks its working copy: keys the archive brings and keys the
settling destroys are held here, and the home's vault receives them (VaultImage) only once the copy
verified. A key destroyed in the home's vault or in the archive's log is never served, so an older
archive cannot bring back what a later forget destroyed in the home that knows it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from engram_memory.engine.ports.host_vault import HeldKey, VaultImage
from engram_memory.engine.ports.store import IssuedBindingRow, KeyVault, RevocationRow, Scope, WrappedKey


class RestoringVault:
    def __init__(self, home: KeyVault, carried: VaultImage | None) -> None:
        self._home = home
        self._carried = carried or VaultImage(keys=[], destroyed=[], revocations=[], issued=[])
        self._logged = {gone.owner_id for gone in self._carried.destroyed}
        keys = {held.owner_id: held for held in self._carried.keys if held.owner_id not in self._logged}
        blocked = home.shredded(list(keys)) if keys else set()
        self._keys: dict[str, HeldKey] = {owner: held for owner, held in keys.items() if owner not in blocked}
        self._destroyed_now: set[str] = set()

    def additions(self) -> VaultImage:
        """What the home's vault must take in before the restored store is written."""
        keys = [held for owner, held in self._keys.items() if owner not in self._destroyed_now]
        return replace(self._carried, keys=keys)

    # -- the KeyVault port ------------------------------------------------------------------------
    def put(self, scope: Scope, owner_id: str, key: WrappedKey, at_ms: int) -> None:
        self._keys[owner_id] = HeldKey(owner_id, scope, key, at_ms)

    @contextmanager
    def batch(self) -> Iterator[None]:
        yield

    def commit_pending(self) -> None:
        pass

    def run_deferred(self) -> bool:
        return True

    def get(self, scope: Scope, owner_id: str) -> WrappedKey | None:
        if owner_id in self._destroyed_now:
            return None
        held = self._keys.get(owner_id)
        if held is not None and held.scope == scope:
            return held.key
        return self._home.get(scope, owner_id)

    def get_many(self, scope: Scope, owner_ids: Sequence[str]) -> dict[str, WrappedKey]:
        found = {owner: key for owner in owner_ids if (key := self.get(scope, owner)) is not None}
        return found

    def destroy(self, owner_ids: Sequence[str], at_ms: int) -> bool:
        self._destroyed_now.update(owner_ids)
        return True

    def retire(self, owner_ids: Sequence[str], at_ms: int) -> bool:
        return self.destroy(owner_ids, at_ms)

    def shredded(self, owner_ids: Sequence[str]) -> set[str]:
        mine = {owner for owner in owner_ids if owner in self._logged or owner in self._destroyed_now}
        return mine | self._home.shredded(owner_ids)

    def revoke(self, row: RevocationRow) -> RevocationRow:
        raise RuntimeError("a restore revokes nothing")

    def is_revoked(self, token_id: str) -> bool:
        return any(row.token_id == token_id for row in self._carried.revocations) or self._home.is_revoked(token_id)

    def revocation_count(self) -> int:
        return self._home.revocation_count()

    def record_issued(self, row: IssuedBindingRow) -> None:
        raise RuntimeError("a restore issues no binding")

    def was_issued(self, token_id: str) -> bool:
        return any(row.token_id == token_id for row in self._carried.issued) or self._home.was_issued(token_id)

    def issued(
        self, limit: int, *, latest_only_for: str | None = None
    ) -> list[tuple[IssuedBindingRow, RevocationRow | None]]:
        return self._home.issued(limit, latest_only_for=latest_only_for)

    def owners_created_before(self, at_ms: int, *, after: str = "", limit: int | None = None) -> list[str]:
        carried = {owner for owner, held in self._keys.items() if held.created_at_ms < at_ms and owner > after}
        home = self._home.owners_created_before(at_ms, after=after, limit=limit)
        owners = sorted((carried - self._destroyed_now) | set(home))
        if limit is not None and len(home) == limit:
            owners = [owner for owner in owners if owner <= home[-1]]  # the home's next page may sort between
        return owners if limit is None else owners[:limit]

    def close(self) -> None:
        """The home's vault belongs to the restore, which closes it."""
