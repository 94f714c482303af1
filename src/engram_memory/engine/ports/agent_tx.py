"""What the six agent tools need of one transaction, one protocol per concern.

A caller takes the narrowest of these it can (a body reader a BodiesTx, the gate a ConfirmationsTx), or a
protocol of its own that joins the few it uses; `CoreTx` joins them all, and `StoreTx`
(engine/ports/store.py) adds the host's concerns.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Protocol

from engram_memory.engine.ports.rows import (
    AuditRow,
    CandidateRow,
    ConfirmationRow,
    IdempotencyRow,
    IndexedDoc,
    IndexStats,
    JournalEvent,
    RecordChange,
    RecordRow,
    Scope,
    ScopeHead,
    SealedBody,
    StoredVector,
    UnembeddedRecord,
)

__all__ = [
    "AuditTx",
    "BodiesTx",
    "CandidatesTx",
    "ConfirmationsTx",
    "CoreTx",
    "FamiliesTx",
    "IdempotencyTx",
    "JournalTx",
    "LexicalIndexTx",
    "RecordsTx",
    "TombstonesTx",
    "VectorsTx",
]


class JournalTx(Protocol):
    """The scope's journal: its head, its events and their digests."""

    def head(self, scope: Scope) -> ScopeHead | None: ...
    def append_event(self, event: JournalEvent) -> None: ...
    def events(self, scope: Scope) -> Iterator[JournalEvent]: ...
    def event_digest(self, scope: Scope, cursor: int) -> str | None:
        """The digest of the scope's journal event at `cursor`; None when the journal has none there."""
        ...


class CandidatesTx(Protocol):
    """Candidates: the drafts an agent captured, and what became of them."""

    def insert_candidate(self, row: CandidateRow) -> None: ...
    def get_candidate(self, scope: Scope, candidate_id: str) -> CandidateRow | None: ...
    def update_candidate(
        self,
        scope: Scope,
        candidate_id: str,
        *,
        state: str,
        adjudication: bool,
        record_id: str | None,
        review_reasons: Sequence[str] = (),
    ) -> None: ...


class RecordsTx(Protocol):
    """Records: admitted memories and their lifecycle state."""

    def insert_record(self, row: RecordRow) -> None: ...
    def get_record(self, scope: Scope, record_id: str) -> RecordRow | None: ...
    def get_records(self, scope: Scope, record_ids: Sequence[str]) -> dict[str, RecordRow]:
        """The scope's records among these ids, in one read (a page of search hits)."""
        ...

    def set_record_state(self, scope: Scope, record_id: str, state: str, cursor: int) -> None: ...
    def find_record_by_digest(self, scope: Scope, payload_digest: str, state: str) -> str | None: ...


class BodiesTx(Protocol):
    """Sealed bodies, each with its own wrapped data key."""

    def put_body(self, scope: Scope, owner_id: str, body: SealedBody) -> None: ...
    def get_body(self, scope: Scope, owner_id: str) -> SealedBody | None: ...
    def get_bodies(self, scope: Scope, owner_ids: Sequence[str]) -> dict[str, SealedBody]:
        """The scope's bodies among these owners, in one read."""
        ...

    def destroy_body(self, scope: Scope, owner_id: str) -> bool: ...
    def discard_body(self, scope: Scope, owner_id: str) -> None:
        """destroy_body for a caller that needs no answer, which a store may therefore hold back."""
        ...

    def ended_owners(self, owner_ids: Sequence[str]) -> set[str]:
        """Owners the store knows whose body it no longer holds (their key may go)."""
        ...


class LexicalIndexTx(Protocol):
    """The lexical index of accepted_current records (its layout: engine/ports/lexical.py)."""

    def index_record(self, scope: Scope, record_id: str, fields: Mapping[str, str], *, tokenizer: str) -> None:
        """Adds the record's entry (`fields`: space-joined tokens of `tokenizer`, engine/projection.py)."""
        ...

    def unindex_record(self, scope: Scope, record_id: str) -> bool: ...
    def purge_index(self) -> None: ...
    def index_stats(self, scope: Scope) -> IndexStats: ...
    def lexical_candidates(
        self, scope: Scope, terms: Sequence[str], *, valid_at_ms: int, limit: int
    ) -> list[IndexedDoc]: ...
    def term_doc_counts(self, scope: Scope, terms: Sequence[str]) -> dict[str, int]: ...


class VectorsTx(Protocol):
    """The semantic index: one embedding per accepted_current record, dropped with its lexical entry."""

    def put_vector(self, scope: Scope, record_id: str, model: str, vector: bytes, subject: str) -> bool:
        """Writes the record's embedding unless it already has one by `model` (an embedding by another
        model is replaced) or is not accepted_current; True when it wrote."""
        ...

    def vectors(self, scope: Scope, model: str) -> list[StoredVector]:
        """Every accepted_current record of the scope with an embedding by `model`, in rid order."""
        ...

    def vectors_of(self, scope: Scope, model: str, record_ids: Sequence[str]) -> dict[str, bytes]:
        """The embeddings by `model` of these accepted_current records of the scope that have one."""
        ...

    def records_without_vector(self, scope: Scope, models: Sequence[str]) -> list[UnembeddedRecord]:
        """The scope's accepted_current records with no embedding by any of `models`, in rid order."""
        ...

    def record_changes(self, scope: Scope, after: int, through: int, model: str) -> list[RecordChange]:
        """The scope's records whose state changed at a records cursor in (`after`, `through`], in cursor
        order, each with its embedding by `model` when it is accepted_current and has one."""
        ...


class TombstonesTx(Protocol):
    """Tombstone fingerprints: keyed, never content (engine/lifecycle/tombstone_guard.py)."""

    def add_tombstone(self, scope: Scope, fingerprints: Sequence[str], at_ms: int) -> None: ...
    def is_tombstoned(self, scope: Scope, fingerprints: Sequence[str]) -> bool: ...
    def holds_tombstones(self, scope: Scope) -> bool:
        """Whether the scope forgot anything at all: most never did, and then no fingerprint is needed."""
        ...


class FamiliesTx(Protocol):
    """Reconciliation families: keyed digests of family refs, never the refs (engine/admission/families.py)."""

    def add_record_families(self, scope: Scope, record_id: str, family_keys: Sequence[str]) -> None: ...
    def family_records(self, scope: Scope, family_keys: Sequence[str]) -> dict[str, list[str]]:
        """Per family key, the ids of the scope's records in it (any state), in rid order."""
        ...

    def drop_record_families(self, scope: Scope, record_id: str) -> bool:
        """Forgets which families the record was in; True when it was in any."""
        ...


class IdempotencyTx(Protocol):
    """Recorded answers, by principal and idempotency key."""

    def get_idempotency(self, scope: Scope, principal: str, key: str) -> IdempotencyRow | None: ...
    def put_idempotency(self, row: IdempotencyRow) -> None: ...


class ConfirmationsTx(Protocol):
    """Confirmation requests, the host-visible queue of a person's approvals."""

    def find_confirmations(
        self, scope: Scope, principal: str, tool: str, target: str, operation_digest: str
    ) -> list[ConfirmationRow]: ...
    def insert_confirmation(self, row: ConfirmationRow) -> None: ...
    def get_confirmation(self, confirmation_id: str) -> ConfirmationRow | None: ...
    def list_confirmations(self, statuses: Sequence[str] | None) -> list[ConfirmationRow]: ...
    def save_confirmation(self, row: ConfirmationRow) -> None: ...


class AuditTx(Protocol):
    """The audit log."""

    def append_audit(self, row: AuditRow) -> None: ...


class CoreTx(
    JournalTx,
    CandidatesTx,
    RecordsTx,
    BodiesTx,
    LexicalIndexTx,
    VectorsTx,
    TombstonesTx,
    FamiliesTx,
    IdempotencyTx,
    ConfirmationsTx,
    AuditTx,
    Protocol,
):
    """What the six agent tools need of one transaction."""
