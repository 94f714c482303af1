"""Withdraw and forget: gated destruction that leaves only digests behind.

Both need a human's approval; both destroy the data key in the same transaction as the state change.
Forget also drops the record from the lexical index, merges away the deleted tokens, keeps the
payload digest for the tombstone guard, and then pushes the erased bytes out of the WAL.
"""

from __future__ import annotations

from typing import Any

from engram_memory.contract.arguments import ForgetArguments, WithdrawArguments
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.states import (
    CandidateState,
    Operation,
    RecordState,
    candidate_transition,
    record_transition,
)
from engram_memory.contract.tools import Tool
from engram_memory.engine.calls import Call
from engram_memory.engine.deps import Deps
from engram_memory.engine.idempotency import replayed_response
from engram_memory.engine.lifecycle.erasure import coverage_of, destroy_record_key, erase_record
from engram_memory.engine.lifecycle.gate import GateHeld, GatePass, GateRequest, check_gate, consume
from engram_memory.engine.lifecycle.transitions import candidate_withdrawn, record_transitioned
from engram_memory.engine.mutation import remember_response, run_mutation
from engram_memory.engine.ports.agent_tx import ConfirmationsTx, IdempotencyTx
from engram_memory.engine.ports.store import JournalEvent, StoreTx
from engram_memory.engine.receipts import authorization_receipt_digest, transaction_receipt_digest


def withdraw(deps: Deps, call: Call, arguments: WithdrawArguments) -> dict[str, Any]:
    """Raises ContractError NOT_FOUND, ALREADY_TERMINAL, ILLEGAL_TRANSITION, DIGEST_CONFLICT, gate_failed,
    STORE_UNAVAILABLE, MUTATION_OUTCOME_UNKNOWN."""

    def destroy_key(result: dict[str, Any]) -> dict[str, Any]:
        destroyed = deps.vault.destroy([arguments.candidate_id], deps.clock.now_ms())
        return {**result, "key_destruction": "complete" if destroyed else "pending"}

    return run_mutation(
        deps,
        call.scope,
        Tool.WITHDRAW,
        arguments,
        lambda tx, op_digest: _withdraw(deps, tx, call, arguments, op_digest),
        after_commit=destroy_key,
        erase_after=True,
    )


def forget(deps: Deps, call: Call, arguments: ForgetArguments) -> dict[str, Any]:
    """Raises ContractError NOT_FOUND, ALREADY_TERMINAL, DIGEST_CONFLICT, gate_failed,
    STORE_UNAVAILABLE, MUTATION_OUTCOME_UNKNOWN."""

    def destroy_key(result: dict[str, Any]) -> dict[str, Any]:
        coverage = result.pop("coverage")
        return {**result, "coverage_receipt_digest": destroy_record_key(deps, call.scope, coverage)}

    return run_mutation(
        deps,
        call.scope,
        Tool.FORGET,
        arguments,
        lambda tx, op_digest: _forget(deps, tx, call, arguments, op_digest),
        after_commit=destroy_key,
        erase_after=True,
    )


def _replay(tx: IdempotencyTx, call: Call, tool: Tool, key: str, op_digest: str) -> dict[str, Any] | None:
    prior = replayed_response(tx.get_idempotency(call.scope, call.binding.principal, key), tool, op_digest)
    return None if prior is None else {**prior, "replayed": True}


def _gate(
    tx: ConfirmationsTx, call: Call, tool: Tool, target: str, op_digest: str, reason_ref: str, summary: dict[str, Any]
) -> GatePass | GateHeld:
    return check_gate(
        tx,
        GateRequest(call.scope, call.actor, tool.value, target, op_digest, reason_ref, summary),
        call.now_ms,
    )


def _receipt(
    call: Call,
    tool: Tool,
    key: str,
    event: JournalEvent,
    operation: str,
    from_state: str,
    to_state: str,
    gate: GatePass,
) -> dict[str, Any]:
    return {
        "event_id": event.event_id,
        "operation": operation,
        "from_state": from_state,
        "to_state": to_state,
        "cursor": event.cursor,
        "event_digest": event.event_digest,
        "authorization_receipt_digest": authorization_receipt_digest(
            call, tool.value, gate.confirmation.confirmation_id
        ),
        "transaction_receipt_digest": transaction_receipt_digest(tool.value, key, [event]),
    }


def _withdraw(
    deps: Deps, tx: StoreTx, call: Call, arguments: WithdrawArguments, op_digest: str
) -> dict[str, Any] | GateHeld:
    key, candidate_id, reason_ref = arguments.idempotency_key, arguments.candidate_id, arguments.reason_ref
    replay = _replay(tx, call, Tool.WITHDRAW, key, op_digest)
    if replay is not None:
        return replay
    candidate = tx.get_candidate(call.scope, candidate_id)
    if candidate is None:
        raise ContractError(ErrorCode.NOT_FOUND)
    to_state = candidate_transition(Operation.WITHDRAW, CandidateState(candidate.state))
    summary = {
        "operation": "withdraw",
        "candidate_id": candidate_id,
        "from_state": candidate.state,
        "destroys": ["candidate body", "candidate data key"],
    }
    gate = _gate(tx, call, Tool.WITHDRAW, candidate_id, op_digest, reason_ref, summary)
    if isinstance(gate, GateHeld):
        return gate
    tx.destroy_body(call.scope, candidate_id)
    event = candidate_withdrawn(
        tx,
        candidate,
        actor=call.actor_claims(),
        at_ms=call.now_ms,
        reason_ref=reason_ref,
        confirmation_id=gate.confirmation.confirmation_id,
    )
    consume(tx, gate, deps.clock.now_ms())
    response = {
        "receipt": _receipt(call, Tool.WITHDRAW, key, event, "withdraw", candidate.state, to_state.value, gate),
        "replayed": False,
    }
    remember_response(tx, call, Tool.WITHDRAW, arguments, op_digest, candidate_id, response)
    return response


def _forget(
    deps: Deps, tx: StoreTx, call: Call, arguments: ForgetArguments, op_digest: str
) -> dict[str, Any] | GateHeld:
    key, record_id, reason_ref = arguments.idempotency_key, arguments.record_id, arguments.reason_ref
    replay = _replay(tx, call, Tool.FORGET, key, op_digest)
    if replay is not None:
        return replay
    record = tx.get_record(call.scope, record_id)
    if record is None:
        raise ContractError(ErrorCode.NOT_FOUND)
    to_state = record_transition(Operation.TOMBSTONE, RecordState(record.state))
    summary = {
        "operation": "tombstone",
        "record_id": record_id,
        "from_state": record.state,
        "destroys": ["record body", "record data key", "lexical index entry"],
    }
    gate = _gate(tx, call, Tool.FORGET, record_id, op_digest, reason_ref, summary)
    if isinstance(gate, GateHeld):
        return gate
    surfaces = erase_record(deps, tx, record, call.now_ms)
    event = record_transitioned(
        tx,
        record,
        Operation.TOMBSTONE,
        to_state,
        actor=call.actor_claims(),
        at_ms=call.now_ms,
        reason_ref=reason_ref,
        extra={"confirmation_id": gate.confirmation.confirmation_id},
    )
    consume(tx, gate, deps.clock.now_ms())
    coverage = coverage_of(record_id, event.cursor, surfaces)
    response = {
        "receipt": _receipt(call, Tool.FORGET, key, event, "tombstone", record.state, to_state.value, gate),
        "replayed": False,
        "projection_invalidation": "complete",
        "coverage": coverage,
    }
    remember_response(tx, call, Tool.FORGET, arguments, op_digest, record_id, response)
    return response
