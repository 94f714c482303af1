"""Rows and journal events for store-level tests, built the way the engine builds them."""

from __future__ import annotations

import itertools
from typing import Any

from engram_memory.engine import journal
from engram_memory.engine.mutation import append_event_as, host_actor
from engram_memory.engine.ports.store import (
    Actor,
    AuditRow,
    CandidateRow,
    ConfirmationRow,
    IdempotencyRow,
    JournalEvent,
    RecordRow,
    Scope,
    StoreTx,
)

SCOPE_A = Scope("tenant-a", "workspace-1")
SCOPE_A2 = Scope("tenant-a", "workspace-2")
SCOPE_B = Scope("tenant-b", "workspace-1")
ACTOR = Actor(principal="alice", agent_id="agent-1", session="session-1")
AT_MS = 1_700_000_000_000
_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):06d}"


def event(tx: StoreTx, scope: Scope, kind: str = journal.CANDIDATE_CAPTURED, **data: Any) -> JournalEvent:
    return append_event_as(tx, scope, host_actor("host:tests"), AT_MS, kind, data or {"candidate_id": new_id("cand")})


def candidate(
    scope: Scope, candidate_id: str, *, cursor: int = 1, state: str = "pending", **fields: Any
) -> CandidateRow:
    values: dict[str, Any] = {
        "scope": scope,
        "candidate_id": candidate_id,
        "state": state,
        "payload_digest": "sha256:" + "a" * 64,
        "evidence_digest": "sha256:" + "b" * 64,
        "actor": ACTOR,
        "captured_at_ms": AT_MS,
        "capture_cursor": cursor,
        "size_bytes": 100,
        "citation_count": 1,
        "has_attestation": False,
        "secret_categories": (),
    }
    values.update(fields)
    return CandidateRow(**values)


def record(scope: Scope, record_id: str, *, state: str = "accepted_current", **fields: Any) -> RecordRow:
    values: dict[str, Any] = {
        "scope": scope,
        "record_id": record_id,
        "candidate_id": new_id("cand"),
        "state": state,
        "payload_digest": "sha256:" + "c" * 64,
        "valid_from_ms": AT_MS,
        "valid_to_ms": None,
        "expires_at_ms": None,
        "admitted_at_ms": AT_MS,
        "state_cursor": 1,
        "actor": ACTOR,
        "captured_at_ms": AT_MS,
    }
    values.update(fields)
    return RecordRow(**values)


def idempotency(scope: Scope, key: str, *, response: dict[str, Any] | None = None, **fields: Any) -> IdempotencyRow:
    values: dict[str, Any] = {
        "scope": scope,
        "principal": "alice",
        "key": key,
        "tool": "engram_memory_capture",
        "operation_digest": "sha256:" + "d" * 64,
        "target": "capture",
        "response": response or {"status": "committed_pending", "cursor": 1},
        "created_at_ms": AT_MS,
    }
    values.update(fields)
    return IdempotencyRow(**values)


def confirmation(scope: Scope, confirmation_id: str, **fields: Any) -> ConfirmationRow:
    values: dict[str, Any] = {
        "confirmation_id": confirmation_id,
        "scope": scope,
        "actor": ACTOR,
        "tool": "engram_memory_forget",
        "target": "mem_abc",
        "operation_digest": "sha256:" + "e" * 64,
        "reason_ref": "ticket:1",
        "summary": {"operation": "forget", "bytes": 10},
        "status": "requested",
        "requested_at_ms": AT_MS,
    }
    values.update(fields)
    return ConfirmationRow(**values)


def audit(audit_id: str, at_ms: int, scope: Scope | None = SCOPE_A) -> AuditRow:
    return AuditRow(
        audit_id=audit_id,
        at_ms=at_ms,
        tool="engram_memory_search",
        outcome="ok",
        tenant=None if scope is None else scope.tenant,
        workspace=None if scope is None else scope.workspace,
        principal="alice",
        request_digest="hmac:1",
    )


def fields(
    primary: str = "", decision: str = "", evidence: str = "", context: str = "", citations: str = ""
) -> dict[str, str]:
    return {"primary": primary, "decision": decision, "evidence": evidence, "context": context, "citations": citations}
