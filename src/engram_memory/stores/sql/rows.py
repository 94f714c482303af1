"""Column lists and row mappings shared by every statement that reads a whole candidate, record, event or request.

Rows become the engine's frozen dataclasses here and nowhere else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engram_memory.engine.ports.store import (
    Actor,
    CandidateRow,
    ConfirmationRow,
    IdempotencyRow,
    JournalEvent,
    RecordRow,
    Scope,
)

EVENT_COLUMNS = "cursor, event_id, kind, at_ms, body, prev_digest, event_digest, affects_records"
CANDIDATE_COLUMNS = (
    "candidate_id, tenant, workspace, state, payload_digest, evidence_digest, principal, agent_id, session,"
    " captured_at_ms, capture_cursor, size_bytes, citation_count, has_attestation, secret_categories,"
    " adjudication, record_id, trust_class, review_reasons"
)
RECORD_COLUMNS = (
    "record_id, tenant, workspace, candidate_id, state, payload_digest, valid_from_ms, valid_to_ms,"
    " expires_at_ms, admitted_at_ms, state_cursor, principal, agent_id, session, captured_at_ms, trust_class,"
    " superseded_by"
)
IDEMPOTENCY_COLUMNS = "tenant, workspace, principal, idem_key, tool, operation_digest, target, response, created_at_ms"
CONFIRMATION_COLUMNS = (
    "confirmation_id, tenant, workspace, principal, agent_id, session, tool, target, operation_digest,"
    " reason_ref, summary, status, requested_at_ms, decided_at_ms, decided_by, approval_expires_at_ms,"
    " consumed_at_ms"
)


def compact_json(value: object) -> str:
    """How recorded answers and summaries are kept: compact, key order as given, text not escaped."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def event_row(scope: Scope, row: Sequence[Any]) -> JournalEvent:
    return JournalEvent(
        scope=scope,
        cursor=row[0],
        event_id=row[1],
        kind=row[2],
        at_ms=row[3],
        body=json.loads(row[4]),
        prev_digest=row[5],
        event_digest=row[6],
        affects_records=bool(row[7]),
    )


def candidate_row(row: Sequence[Any]) -> CandidateRow:
    return CandidateRow(
        scope=Scope(tenant=row[1], workspace=row[2]),
        candidate_id=row[0],
        state=row[3],
        payload_digest=row[4],
        evidence_digest=row[5],
        actor=Actor(principal=row[6], agent_id=row[7], session=row[8]),
        captured_at_ms=row[9],
        capture_cursor=row[10],
        size_bytes=row[11],
        citation_count=row[12],
        has_attestation=bool(row[13]),
        secret_categories=tuple(json.loads(row[14])),
        adjudication=bool(row[15]),
        record_id=row[16],
        trust_class=row[17],
        review_reasons=tuple(json.loads(row[18])),
    )


def record_row(row: Sequence[Any]) -> RecordRow:
    return RecordRow(
        scope=Scope(tenant=row[1], workspace=row[2]),
        record_id=row[0],
        candidate_id=row[3],
        state=row[4],
        payload_digest=row[5],
        valid_from_ms=row[6],
        valid_to_ms=row[7],
        expires_at_ms=row[8],
        admitted_at_ms=row[9],
        state_cursor=row[10],
        actor=Actor(principal=row[11], agent_id=row[12], session=row[13]),
        captured_at_ms=row[14],
        trust_class=row[15],
        superseded_by=row[16],
    )


def confirmation_row(row: Sequence[Any]) -> ConfirmationRow:
    return ConfirmationRow(
        confirmation_id=row[0],
        scope=Scope(tenant=row[1], workspace=row[2]),
        actor=Actor(principal=row[3], agent_id=row[4], session=row[5]),
        tool=row[6],
        target=row[7],
        operation_digest=row[8],
        reason_ref=row[9],
        summary=json.loads(row[10]),
        status=row[11],
        requested_at_ms=row[12],
        decided_at_ms=row[13],
        decided_by=row[14],
        approval_expires_at_ms=row[15],
        consumed_at_ms=row[16],
    )


def candidate_values(row: CandidateRow) -> tuple[Any, ...]:
    """The row in CANDIDATE_COLUMNS' order, as every store writes it."""
    return (
        row.candidate_id,
        row.scope.tenant,
        row.scope.workspace,
        row.state,
        row.payload_digest,
        row.evidence_digest,
        row.actor.principal,
        row.actor.agent_id,
        row.actor.session,
        row.captured_at_ms,
        row.capture_cursor,
        row.size_bytes,
        row.citation_count,
        int(row.has_attestation),
        json.dumps(list(row.secret_categories)),
        int(row.adjudication),
        row.record_id,
        row.trust_class,
        json.dumps(list(row.review_reasons)),
    )


def record_values(row: RecordRow) -> tuple[Any, ...]:
    """The row in RECORD_COLUMNS' order."""
    return (
        row.record_id,
        row.scope.tenant,
        row.scope.workspace,
        row.candidate_id,
        row.state,
        row.payload_digest,
        row.valid_from_ms,
        row.valid_to_ms,
        row.expires_at_ms,
        row.admitted_at_ms,
        row.state_cursor,
        row.actor.principal,
        row.actor.agent_id,
        row.actor.session,
        row.captured_at_ms,
        row.trust_class,
        row.superseded_by,
    )


def idempotency_values(row: IdempotencyRow) -> tuple[Any, ...]:
    """The row in IDEMPOTENCY_COLUMNS' order."""
    return (
        row.scope.tenant,
        row.scope.workspace,
        row.principal,
        row.key,
        row.tool,
        row.operation_digest,
        row.target,
        compact_json(row.response),
        row.created_at_ms,
    )
