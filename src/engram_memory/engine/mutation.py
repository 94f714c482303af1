"""The frame every mutating call runs in: one operation digest, one write transaction, one recorded answer.

A body returns the gate's GateHeld when the confirmation gate held the call back; the request it left
for the host must commit, so the gate's refusal is raised only after the transaction ends.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

from engram_memory.contract.arguments import MutatingArguments
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.tools import Tool
from engram_memory.engine import journal
from engram_memory.engine.calls import Call
from engram_memory.engine.deps import Deps
from engram_memory.engine.idempotency import operation_digest
from engram_memory.engine.lifecycle.gate import GateHeld
from engram_memory.engine.ports.agent_tx import IdempotencyTx, JournalTx
from engram_memory.engine.ports.store import IdempotencyRow, JournalEvent, Scope, ScopeHead, StoreTx, TransientConflict

Body = Callable[[StoreTx, str], dict[str, Any] | GateHeld]
AfterCommit = Callable[[dict[str, Any]], dict[str, Any]]

# How many times a body runs when the store keeps rolling it back for concurrent transactions.
MAX_ATTEMPTS = 3


def run_mutation(
    deps: Deps,
    scope: Scope,
    tool: Tool,
    arguments: MutatingArguments,
    body: Body,
    *,
    after_commit: AfterCommit | None = None,
    erase_after: bool = False,
) -> dict[str, Any]:
    """Raises ContractError gate_failed when `body` was held by the gate, besides whatever `body` raises.

    `after_commit` runs on fresh results and on replays alike: work that must follow the commit
    (destroying data keys, erasing pages) may have been cut short the first time.

    A transaction the store rolled back for a concurrent one (TransientConflict) wrote nothing, so
    the body runs again in a new transaction, up to MAX_ATTEMPTS times; then STORE_UNAVAILABLE. A
    rolled-back attempt may leave a data key it sealed for nothing: an orphan that opens nothing
    (verify counts such keys).
    """
    op_digest = operation_digest(tool, arguments.given)
    result = _run_body(deps, scope, body, op_digest)
    if isinstance(result, GateHeld):
        raise result.refusal()
    if after_commit is not None:
        result = after_commit(result)
    if erase_after:
        deps.store.erase_physically()
    return result


def _run_body(deps: Deps, scope: Scope, body: Body, op_digest: str) -> dict[str, Any] | GateHeld:
    for _attempt in range(MAX_ATTEMPTS):
        try:
            with deps.store.write(scopes=(scope,)) as tx:
                return body(tx, op_digest)
        except TransientConflict:
            continue
    raise ContractError(ErrorCode.STORE_UNAVAILABLE)


def remember_response(
    tx: IdempotencyTx,
    call: Call,
    tool: Tool,
    arguments: MutatingArguments,
    op_digest: str,
    target: str,
    response: Mapping[str, Any],
) -> None:
    """Keeps the answer for replays at any later time; `replayed` is added when it is replayed."""
    tx.put_idempotency(
        IdempotencyRow(
            scope=call.scope,
            principal=call.binding.principal,
            key=arguments.idempotency_key,
            tool=tool.value,
            operation_digest=op_digest,
            target=target,
            response={name: value for name, value in response.items() if name != "replayed"},
            created_at_ms=call.now_ms,
        )
    )


def head_of(tx: JournalTx, call: Call) -> ScopeHead:
    return tx.head(call.scope) or journal.initial_head(call.scope)


def append_event_as(
    tx: JournalTx, scope: Scope, actor: Mapping[str, str], at_ms: int, kind: str, data: Mapping[str, Any]
) -> JournalEvent:
    """Extends a scope's journal by one event; the store's keys refuse a second event at its cursor."""
    head = tx.head(scope) or journal.initial_head(scope)
    event = journal.next_event(scope, head, kind=kind, at_ms=at_ms, actor=actor, data=data)
    tx.append_event(event)
    return event


def append_event(tx: JournalTx, call: Call, kind: str, data: Mapping[str, Any]) -> JournalEvent:
    """Extends the caller's scope journal by one event, by the caller, at the call's time."""
    return append_event_as(tx, call.scope, call.actor_claims(), call.now_ms, kind, data)


def host_actor(decided_by: str) -> dict[str, str]:
    """How a host operation signs the journal: the person, through the host path, never an agent."""
    return {"principal": decided_by, "agent_id": "host", "session": "host"}


REASON_REF_MAX_BYTES = 512


def reason_ref_ok(reason_ref: str | None) -> bool:
    """A host decision's reason follows the opaque-ref rule agents follow: NFC, 1-512 UTF-8 bytes (or none)."""
    if reason_ref is None:
        return True
    size = len(reason_ref.encode("utf-8", errors="replace"))
    return 1 <= size <= REASON_REF_MAX_BYTES and unicodedata.normalize("NFC", reason_ref) == reason_ref
