"""Scope heads a batch keeps between its savepoints, so a write does not read back the head it just wrote.

A head may be kept only while the batch holds its scope's lock: then no other writer can move it. The
batch forgets them all at every commit (its locks go) and whenever a savepoint rolls back (what the
savepoint wrote, its head included, is undone).
"""

from __future__ import annotations

from collections.abc import Callable

from engram_memory.engine.ports.rows import JournalEvent, Scope, ScopeHead


class HeadCache:
    def __init__(self, locked: Callable[[Scope], bool]) -> None:
        self._locked = locked
        self._heads: dict[Scope, ScopeHead] = {}

    def get(self, scope: Scope) -> ScopeHead | None:
        return self._heads.get(scope)

    def read(self, scope: Scope, head: ScopeHead) -> None:
        if self._locked(scope):
            self._heads[scope] = head

    def appended(self, event: JournalEvent) -> None:
        """The head after `event`, when the head before it is known (else it is read again when asked)."""
        before = self._heads.get(event.scope)
        if before is None:
            if event.cursor != 1 or not self._locked(event.scope):
                return
            before = ScopeHead(cursor=0, digest=event.prev_digest, records_cursor=0)  # a new scope's first event
        records_cursor = event.cursor if event.affects_records else before.records_cursor
        self._heads[event.scope] = ScopeHead(
            cursor=event.cursor, digest=event.event_digest, records_cursor=records_cursor
        )

    def clear(self) -> None:
        self._heads.clear()
