"""The confirmation gate: a human's approval, bound to tool, target, operation and principal.

An approval is issued only on the host path, lives at most 300 s, is consumed by one execution, and
that execution must commit within 30 s of the gate check. Nothing an agent writes can stand in for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.ids import new_confirmation_id
from engram_memory.engine.ports.agent_tx import ConfirmationsTx
from engram_memory.engine.ports.store import Actor, ConfirmationRow, Scope
from engram_memory.engine.refusals import Refusal, Refused

APPROVAL_TTL_MAX_MS = 300_000
COMMIT_WINDOW_MS = 30_000
REQUEST_TTL_MS = 3_600_000

REQUESTED = "requested"
APPROVED = "approved"
DENIED = "denied"
CONSUMED = "consumed"
EXPIRED = "expired"


@dataclass(frozen=True, slots=True)
class GateRequest:
    scope: Scope
    actor: Actor
    tool: str
    target: str
    operation_digest: str
    reason_ref: str | None
    summary: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class GatePass:
    """A usable approval found at `checked_at_ms`; consume it in the same transaction."""

    confirmation: ConfirmationRow
    checked_at_ms: int


def effective_status(row: ConfirmationRow, now_ms: int) -> str:
    """Requests and approvals lapse by time alone; the stored status is rewritten lazily."""
    if row.status == REQUESTED and now_ms >= row.requested_at_ms + REQUEST_TTL_MS:
        return EXPIRED
    if row.status == APPROVED and (row.approval_expires_at_ms is None or now_ms >= row.approval_expires_at_ms):
        return EXPIRED
    return row.status


@dataclass(frozen=True, slots=True)
class GateHeld:
    """No usable approval: the request the host sees (left or found), to be named in the gate_failed."""

    confirmation_id: str
    denied: bool = False

    def refusal(self) -> ContractError:
        """gate_failed naming the request, with one sentence the agent can pass to its person."""
        if self.denied:
            sentence = (
                f"A person denied confirmation request {self.confirmation_id} on the host: this operation will "
                "not run; do not repeat it unless the person asks for it again."
            )
        else:
            sentence = (
                f"Ask a person to approve confirmation request {self.confirmation_id} on the host "
                f"(engram-memory confirmations approve {self.confirmation_id}), then repeat this call unchanged, "
                "with the same idempotency_key."
            )
        fields = {"confirmation_request_id": self.confirmation_id, "for_the_person": sentence}
        return ContractError(ErrorCode.GATE_FAILED, fields=fields)


def check_gate(tx: ConfirmationsTx, request: GateRequest, now_ms: int) -> GatePass | GateHeld:
    """A pass when a live approval exists; otherwise makes sure the host sees a request, and names it.

    A denied operation is not asked again: the agent must start a new operation (a new key).
    """
    rows = tx.find_confirmations(
        request.scope, request.actor.principal, request.tool, request.target, request.operation_digest
    )
    statuses = [effective_status(row, now_ms) for row in rows]
    for row, status in zip(rows, statuses, strict=True):
        if status == APPROVED:
            return GatePass(confirmation=row, checked_at_ms=now_ms)
    for wanted in (REQUESTED, DENIED):
        for row, status in zip(rows, statuses, strict=True):
            if status == wanted:
                return GateHeld(row.confirmation_id, denied=status == DENIED)
    confirmation_id = new_confirmation_id()
    tx.insert_confirmation(
        ConfirmationRow(
            confirmation_id=confirmation_id,
            scope=request.scope,
            actor=request.actor,
            tool=request.tool,
            target=request.target,
            operation_digest=request.operation_digest,
            reason_ref=request.reason_ref,
            summary=dict(request.summary),
            status=REQUESTED,
            requested_at_ms=now_ms,
        )
    )
    return GateHeld(confirmation_id)


def consume(tx: ConfirmationsTx, gate_pass: GatePass, now_ms: int) -> None:
    """Marks the approval used. Raises ContractError GATE_FAILED past the 30 s commit window."""
    if now_ms - gate_pass.checked_at_ms > COMMIT_WINDOW_MS:
        raise ContractError(ErrorCode.GATE_FAILED)
    tx.save_confirmation(replace(gate_pass.confirmation, status=CONSUMED, consumed_at_ms=now_ms))


class ConfirmationError(Refused):
    """A person's decision on a confirmation turned down (unknown id, already decided, expired)."""


def approve(tx: ConfirmationsTx, confirmation_id: str, *, now_ms: int, decided_by: str, ttl_ms: int) -> ConfirmationRow:
    if not 0 < ttl_ms <= APPROVAL_TTL_MAX_MS:
        raise ConfirmationError(Refusal.APPROVAL_TTL)
    row = _open_request(tx, confirmation_id, now_ms)
    approved = replace(
        row,
        status=APPROVED,
        decided_at_ms=now_ms,
        decided_by=decided_by,
        approval_expires_at_ms=now_ms + ttl_ms,
    )
    tx.save_confirmation(approved)
    return approved


def deny(tx: ConfirmationsTx, confirmation_id: str, *, now_ms: int, decided_by: str) -> ConfirmationRow:
    row = _open_request(tx, confirmation_id, now_ms)
    denied = replace(row, status=DENIED, decided_at_ms=now_ms, decided_by=decided_by)
    tx.save_confirmation(denied)
    return denied


def _open_request(tx: ConfirmationsTx, confirmation_id: str, now_ms: int) -> ConfirmationRow:
    row = tx.get_confirmation(confirmation_id)
    if row is None:
        raise ConfirmationError(Refusal.NO_SUCH_CONFIRMATION)
    status = effective_status(row, now_ms)
    if status == EXPIRED:
        raise ConfirmationError(Refusal.CONFIRMATION_EXPIRED)
    if status != REQUESTED:
        raise ConfirmationError(Refusal.CONFIRMATION_DECIDED, status=status)
    return row
