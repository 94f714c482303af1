"""What the host's lifecycle maintenance needs of a transaction (records dispute ... tombstone, expiry).

The host names a record by id alone, so these look-ups span scopes; every change they lead to is
still written in the record's own scope.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from engram_memory.engine.ports.rows import JournalEvent, RecordRow, Scope


@dataclass(frozen=True, slots=True)
class RecordFilter:
    """Which records a host listing shows; None means any."""

    tenant: str | None = None
    workspace: str | None = None
    state: str | None = None
    limit: int = 1000


class MaintenanceTx(Protocol):
    """Host-path methods; agent calls never use them."""

    def find_record(self, record_id: str) -> RecordRow | None:
        """The record with this id in whatever scope holds it (record ids are unique store-wide)."""
        ...

    def set_superseded_by(self, scope: Scope, record_id: str, successor_id: str | None) -> None: ...

    def records_superseded_by(self, scope: Scope, successor_id: str) -> list[str]: ...

    def records_due_for_expiry(self, now_ms: int, states: Sequence[str], limit: int) -> list[RecordRow]:
        """Records in `states` whose retention expiry is at or before `now_ms`, soonest first, in any scope."""
        ...

    def list_records(self, filters: RecordFilter) -> list[RecordRow]: ...

    def record_history(self, scope: Scope, record_id: str, kinds: Sequence[str]) -> list[JournalEvent]:
        """The record's journal events of these kinds, in cursor order."""
        ...
