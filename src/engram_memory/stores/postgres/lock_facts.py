"""What a batch may remember between its writes while it holds a scope's lock, to save a round trip each.

Every writer of a scope takes its lock, so an answer read under it stays true while the batch holds it,
except for what the batch writes itself, which is forgotten as it is written. Everything goes when the
lock goes (a commit) and when a write fails.

* ExpectedKeys: idempotency keys the batch was told it will look up (Store.expect_idempotency), read a
  window at a time: an import looks up two keys a pair, almost always absent, and one query answers the
  next few hundred.
* UntombstonedScopes: scopes found to hold no tombstone at all, so that an admission's check of what the
  scope forgot needs no query (most scopes never forgot anything).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from engram_memory.engine.ports.rows import IdempotencyRow, Scope

WINDOW = 256  # keys read per query

_Key = tuple[Scope, str, str]  # scope, principal, key


class ExpectedKeys:
    def __init__(self, locked: Callable[[Scope], bool]) -> None:
        self._locked = locked
        self._order: dict[tuple[Scope, str], list[str]] = {}
        self._position: dict[_Key, int] = {}
        self._known: dict[_Key, IdempotencyRow | None] = {}

    def expect(self, scope: Scope, principal: str, keys: Sequence[str]) -> None:
        order = self._order.setdefault((scope, principal), [])
        for key in keys:
            if (scope, principal, key) not in self._position:
                self._position[(scope, principal, key)] = len(order)
                order.append(key)

    def known(self, scope: Scope, principal: str, key: str) -> tuple[bool, IdempotencyRow | None]:
        """(whether the answer is known, the row or None when the key is unused)."""
        wanted = (scope, principal, key)
        if wanted in self._known:
            return True, self._known[wanted]
        return False, None

    def window(self, scope: Scope, principal: str, key: str) -> list[str]:
        """The expected keys from this one on whose answers are not known (none when it is not expected,
        or the scope's lock is not held, so nothing read could be kept)."""
        position = self._position.get((scope, principal, key))
        if position is None or not self._locked(scope):
            return []
        order = self._order[(scope, principal)]
        ahead = (k for k in order[position:] if (scope, principal, k) not in self._known)
        return [k for _, k in zip(range(WINDOW), ahead, strict=False)]

    def fill(self, scope: Scope, principal: str, keys: Sequence[str], found: Mapping[str, IdempotencyRow]) -> None:
        if self._locked(scope):
            for key in keys:
                self._known[(scope, principal, key)] = found.get(key)

    def written(self, scope: Scope, principal: str, key: str) -> None:
        self._known.pop((scope, principal, key), None)

    def clear(self) -> None:
        self._known.clear()


class UntombstonedScopes:
    def __init__(self, locked: Callable[[Scope], bool]) -> None:
        self._locked = locked
        self._scopes: set[Scope] = set()

    def known(self, scope: Scope) -> bool:
        return scope in self._scopes

    def found_none(self, scope: Scope) -> None:
        if self._locked(scope):
            self._scopes.add(scope)

    def tombstoned(self, scope: Scope) -> None:
        self._scopes.discard(scope)

    def clear(self) -> None:
        self._scopes.clear()


class LockFacts:
    """A batch's facts of both kinds, forgotten together."""

    def __init__(self, locked: Callable[[Scope], bool]) -> None:
        self.keys = ExpectedKeys(locked)
        self.untombstoned = UntombstonedScopes(locked)

    def clear(self) -> None:
        self.keys.clear()
        self.untombstoned.clear()
