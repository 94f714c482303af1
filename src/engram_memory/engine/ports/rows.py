"""The rows that cross the engine's ports: plain frozen dataclasses, no driver type ever.

Kept apart from the port protocols so that every concern's protocol module can import them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
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
    # The body's canonical JSON when the engine has just computed it for the digest (stores keep it as is).
    body_json: bytes | None = field(default=None, compare=False, repr=False)


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
    trust_class: str = "asserted"
    review_reasons: tuple[str, ...] = ()


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
    trust_class: str = "asserted"
    superseded_by: str | None = None


@dataclass(frozen=True, slots=True)
class SealedBody:
    """A body as the store keeps it: ciphertext only. Its data key lives in the key vault."""

    nonce: bytes
    ciphertext: bytes


@dataclass(frozen=True, slots=True)
class WrappedKey:
    """A body's data key, wrapped by a key-encryption key of the host's ring."""

    kek_id: str
    wrapped: bytes


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
class StoredVector:
    """One accepted_current record's embedding as the semantic index holds it, with what eligibility reads."""

    record_id: str
    vector: bytes
    subject: str
    valid_from_ms: int
    valid_to_ms: int | None
    expires_at_ms: int | None


@dataclass(frozen=True, slots=True)
class RecordChange:
    """A record whose state changed after a records cursor, as the semantic index needs it: its state and
    validity, and its embedding by the index's model when it is accepted_current and has one."""

    record_id: str
    state: str
    state_cursor: int
    valid_from_ms: int
    valid_to_ms: int | None
    expires_at_ms: int | None
    vector: bytes | None
    subject: str | None


@dataclass(frozen=True, slots=True)
class UnembeddedRecord:
    """An accepted_current record with no embedding by the current model yet (see VectorCache)."""

    record_id: str
    valid_from_ms: int
    valid_to_ms: int | None
    expires_at_ms: int | None

    def with_vector(self, vector: bytes, subject: str) -> StoredVector:
        return StoredVector(self.record_id, vector, subject, self.valid_from_ms, self.valid_to_ms, self.expires_at_ms)


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
    # The tokenizer that built the scope's entries as the store keeps it (None: the first one, or none yet).
    tokenizer: str | None = None


@dataclass(frozen=True, slots=True)
class RevocationRow:
    """A binding the host cut off before it expired."""

    token_id: str
    revoked_at_ms: int
    revoked_by: str


@dataclass(frozen=True, slots=True)
class IssuedBindingRow:
    """A binding this home signed: its claims, never the token (whoever holds a token can use it)."""

    token_id: str
    tenant: str
    workspace: str
    principal: str
    agent_id: str
    session: str
    purpose_ref: str
    grants: tuple[str, ...]
    confirm_mutations: bool
    trust_class: str
    issued_at_ms: int
    expires_at_ms: int
    issued_by: str
