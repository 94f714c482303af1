"""The engine's ports: what it needs from a store, a key ring, a policy source and a clock.

Stores implement `Store`; every engine rule lives above this line, so SQLite and PostgreSQL only
persist and fetch. Rows are plain frozen dataclasses: no driver type crosses the port.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote


@dataclass(frozen=True, slots=True)
class Scope:
    """Exactly one {tenant, workspace}: every read and write is confined to one."""

    tenant: str
    workspace: str

    @property
    def ref(self) -> str:
        """The scope_ref the store adds to what it keeps and digests; quoting keeps it unambiguous."""
        return "scope:" + quote(self.tenant, safe="") + "/" + quote(self.workspace, safe="")


@dataclass(frozen=True, slots=True)
class ScopeHead:
    cursor: int
    digest: str
    records_cursor: int


@dataclass(frozen=True, slots=True)
class JournalEvent:
    scope: Scope
    cursor: int
    event_id: str
    kind: str
    at_ms: int
    body: Mapping[str, Any]
    prev_digest: str
    event_digest: str
    affects_records: bool


@dataclass(frozen=True, slots=True)
class Actor:
    principal: str
    agent_id: str
    session: str


@dataclass(frozen=True, slots=True)
class CandidateRow:
    scope: Scope
    candidate_id: str
    state: str
    payload_digest: str
    evidence_digest: str
    actor: Actor
    captured_at_ms: int
    capture_cursor: int
    size_bytes: int
    citation_count: int
    has_attestation: bool
    secret_categories: tuple[str, ...]
    adjudication: bool = False
    record_id: str | None = None


@dataclass(frozen=True, slots=True)
class RecordRow:
    scope: Scope
    record_id: str
    candidate_id: str
    state: str
    payload_digest: str
    valid_from_ms: int
    valid_to_ms: int | None
    expires_at_ms: int | None
    admitted_at_ms: int
    state_cursor: int
    actor: Actor
    captured_at_ms: int


@dataclass(frozen=True, slots=True)
class SealedBody:
    kek_id: str
    wrapped_key: bytes
    nonce: bytes
    ciphertext: bytes


@dataclass(frozen=True, slots=True)
class IdempotencyRow:
    scope: Scope
    principal: str
    key: str
    tool: str
    operation_digest: str
    target: str
    response: Mapping[str, Any]
    created_at_ms: int


@dataclass(frozen=True, slots=True)
class ConfirmationRow:
    confirmation_id: str
    scope: Scope
    actor: Actor
    tool: str
    target: str
    operation_digest: str
    reason_ref: str | None
    summary: Mapping[str, Any]
    status: str
    requested_at_ms: int
    decided_at_ms: int | None = None
    decided_by: str | None = None
    approval_expires_at_ms: int | None = None
    consumed_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class AuditRow:
    audit_id: str
    at_ms: int
    tool: str
    outcome: str
    tenant: str | None = None
    workspace: str | None = None
    principal: str | None = None
    agent_id: str | None = None
    session: str | None = None
    token_id: str | None = None
    request_digest: str | None = None
    response_digest: str | None = None


@dataclass(frozen=True, slots=True)
class IndexedDoc:
    """One accepted_current record as the lexical index holds it: space-joined tokens per field."""

    record_id: str
    fields: Mapping[str, str]
    valid_from_ms: int
    valid_to_ms: int | None


@dataclass(frozen=True, slots=True)
class IndexStats:
    doc_count: int
    field_token_totals: Mapping[str, int] = field(default_factory=dict)


class StoreTx(Protocol):
    """One transaction. Writes are only legal inside `Store.write()`."""

    # journal
    def head(self, scope: Scope) -> ScopeHead | None: ...
    def append_event(self, event: JournalEvent) -> None: ...
    def events(self, scope: Scope) -> Iterator[JournalEvent]: ...

    # candidates and records
    def insert_candidate(self, row: CandidateRow) -> None: ...
    def get_candidate(self, scope: Scope, candidate_id: str) -> CandidateRow | None: ...
    def update_candidate(
        self, scope: Scope, candidate_id: str, *, state: str, adjudication: bool, record_id: str | None
    ) -> None: ...
    def insert_record(self, row: RecordRow) -> None: ...
    def get_record(self, scope: Scope, record_id: str) -> RecordRow | None: ...
    def set_record_state(self, scope: Scope, record_id: str, state: str, cursor: int) -> None: ...
    def find_record_by_digest(self, scope: Scope, payload_digest: str, state: str) -> str | None: ...

    # sealed bodies (each with its own wrapped data key)
    def put_body(self, scope: Scope, owner_id: str, body: SealedBody) -> None: ...
    def get_body(self, scope: Scope, owner_id: str) -> SealedBody | None: ...
    def destroy_body(self, scope: Scope, owner_id: str) -> bool: ...

    # lexical index of accepted_current records
    def index_record(self, scope: Scope, record_id: str, fields: Mapping[str, str]) -> None: ...
    def unindex_record(self, scope: Scope, record_id: str) -> bool: ...
    def purge_index(self) -> None: ...
    def index_stats(self, scope: Scope) -> IndexStats: ...
    def lexical_candidates(
        self, scope: Scope, terms: Sequence[str], *, valid_at_ms: int, limit: int
    ) -> list[IndexedDoc]: ...
    def term_doc_counts(self, scope: Scope, terms: Sequence[str]) -> dict[str, int]: ...

    # tombstone digests (never content)
    def add_tombstone(self, scope: Scope, payload_digest: str, at_ms: int) -> None: ...
    def is_tombstoned(self, scope: Scope, payload_digest: str) -> bool: ...

    # idempotency
    def get_idempotency(self, scope: Scope, principal: str, key: str) -> IdempotencyRow | None: ...
    def put_idempotency(self, row: IdempotencyRow) -> None: ...

    # confirmations (host-visible queue)
    def find_confirmations(
        self, scope: Scope, principal: str, tool: str, target: str, operation_digest: str
    ) -> list[ConfirmationRow]: ...
    def insert_confirmation(self, row: ConfirmationRow) -> None: ...
    def get_confirmation(self, confirmation_id: str) -> ConfirmationRow | None: ...
    def list_confirmations(self, statuses: Sequence[str] | None) -> list[ConfirmationRow]: ...
    def save_confirmation(self, row: ConfirmationRow) -> None: ...

    # audit
    def append_audit(self, row: AuditRow) -> None: ...


class Store(Protocol):
    def write(self) -> AbstractContextManager[StoreTx]:
        """A serialised write transaction; ContractError STORE_UNAVAILABLE before commit,
        MUTATION_OUTCOME_UNKNOWN when the commit itself fails."""
        ...

    def read(self) -> AbstractContextManager[StoreTx]:
        """A consistent snapshot for reads; ContractError STORE_UNAVAILABLE on failure."""
        ...

    def erase_physically(self) -> bool:
        """Push erased bytes out of every file (WAL included); False when readers held it back."""
        ...

    @property
    def index_name(self) -> str: ...

    def close(self) -> None: ...


class KeyRing(Protocol):
    """Key-encryption keys, kept outside the data store (host key file or a KMS)."""

    @property
    def active_kek_id(self) -> str: ...
    def wrap(self, data_key: bytes) -> tuple[str, bytes]: ...
    def unwrap(self, kek_id: str, wrapped: bytes) -> bytes: ...


class Clock(Protocol):
    def now_ms(self) -> int: ...
