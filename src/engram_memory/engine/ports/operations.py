"""What verification, statistics, the audit export and revocation need of a transaction.

Verification reads rows as raw as the store keeps them (text as bytes), so a damaged row can be
named as JOURNAL_CORRUPT instead of raising while it is decoded.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Protocol

from engram_memory.engine.ports.rows import AuditRow, Scope


@dataclass(frozen=True, slots=True)
class RawJournalRow:
    """One journal row exactly as stored: text columns as bytes, numbers as whatever the file holds."""

    tenant: bytes
    workspace: bytes
    cursor: object
    event_id: bytes | None
    kind: bytes | None
    at_ms: object
    body: bytes | None
    prev_digest: bytes | None
    event_digest: bytes | None
    affects_records: object


@dataclass(frozen=True, slots=True)
class CandidateStateRow:
    candidate_id: str
    state: str
    adjudication: bool


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One row of the lexical index under a scope's token, with the record it points at (if any)."""

    rowid: int
    record_id: str | None
    record_scope: Scope | None
    fields: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class VectorEntry:
    """One stored embedding of a scope: the record it belongs to (if any), that record's state, the model."""

    record_id: str | None
    state: str | None
    model: str


@dataclass(frozen=True, slots=True)
class StateCount:
    scope: Scope
    state: str
    count: int
    adjudication: bool = False


@dataclass(frozen=True, slots=True)
class SealedOwner:
    """One sealed body and what owns it: kind is "record", "candidate" or "none" (an orphan)."""

    scope: Scope
    owner_id: str
    kind: str
    state: str | None


class OperationsTx(Protocol):
    """Host-path methods; agent calls never use them."""

    # verification: what each scope holds, read raw
    def scope_names(self) -> list[tuple[bytes, bytes]]:
        """Every (tenant, workspace) named by any table, as stored bytes."""
        ...

    def journal_rows(self, scope: Scope) -> Iterator[RawJournalRow]: ...
    def candidate_states(self, scope: Scope) -> list[CandidateStateRow]: ...
    def record_states(self, scope: Scope) -> dict[str, str]: ...
    def body_owners(self, scope: Scope) -> set[str]: ...
    def sealed_owners(self) -> list[SealedOwner]:
        """Every sealed body of every scope with its owner's kind and state (a restore settles them all)."""
        ...

    def index_entries(self, scope: Scope) -> list[IndexEntry]: ...
    def index_row_count(self) -> int: ...
    def vector_entries(self, scope: Scope) -> list[VectorEntry]: ...
    def index_integrity_ok(self) -> bool:
        """The full-text index's own consistency check; needs a write transaction."""
        ...

    # re-indexing under another tokenizer (engine/recall/reindex.py)
    def reindex_record(self, scope: Scope, record_id: str, fields: Mapping[str, str]) -> bool:
        """Replaces the record's index entry (its vector stays) when it holds other tokens; True when it did."""
        ...

    def set_index_tokenizer(self, scope: Scope, tokenizer: str) -> None:
        """Names the tokenizer that now built every entry of the scope (IndexStats.tokenizer)."""
        ...

    # statistics
    def candidate_state_counts(self) -> list[StateCount]: ...
    def record_state_counts(self) -> list[StateCount]: ...
    def journal_event_counts(self) -> dict[Scope, int]: ...
    def indexed_counts(self) -> dict[Scope | None, int]:
        """Index rows per scope of the record they point at; None for rows that point at no record."""
        ...

    # audit log
    def audit_rows(self, since_ms: int | None, until_ms: int | None) -> Iterator[AuditRow]: ...
