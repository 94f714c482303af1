"""The engine's front: one call in, one envelope out, one audit row written, whatever happens.

Checks run in a fixed order: trusted context, grant, binding expiry, revocation, schema, purpose, then
the operation. Protocol faults propagate as exceptions for the edge to send as JSON-RPC errors;
contract errors and unexpected faults become envelopes with constant messages.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

from engram_memory.contract.arguments import (
    AdmissionArguments,
    CaptureArguments,
    ForgetArguments,
    GetArguments,
    SearchArguments,
    ToolArguments,
    WithdrawArguments,
    typed_arguments,
)
from engram_memory.contract.binding import Binding
from engram_memory.contract.envelopes import failure, refusal, success
from engram_memory.contract.errors import (
    ContractError,
    ErrorCode,
    ProtocolFault,
    trusted_context_unavailable,
    unknown_tool,
)
from engram_memory.contract.ids import new_audit_id
from engram_memory.contract.tools import MUTATING_TOOLS, Tool
from engram_memory.contract.validate import validate_arguments
from engram_memory.engine import capture
from engram_memory.engine.admission import request as admit
from engram_memory.engine.admission.policy import AdmissionPolicy, PolicySource
from engram_memory.engine.calls import Call
from engram_memory.engine.deps import Deps
from engram_memory.engine.host_front import HostFront
from engram_memory.engine.lifecycle import withdraw_forget as removal
from engram_memory.engine.lifecycle.gate import ConfirmationError, approve, deny, effective_status
from engram_memory.engine.lifecycle.housekeeping import KeySweep
from engram_memory.engine.ports.store import AuditRow, Clock, ConfirmationRow, KeyRing, KeyVault, Scope, Store
from engram_memory.engine.recall import reindex
from engram_memory.engine.recall import search_and_get as recall
from engram_memory.engine.recall.indexer import VectorIndexer
from engram_memory.engine.recall.reindex import IndexStatus, ReindexProgress, ReindexReport
from engram_memory.engine.recall.semantic import VectorCache

logger = logging.getLogger(__name__)

_AUDIT_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str)


def _operation(deps: Deps, call: Call, arguments: ToolArguments) -> dict[str, Any]:
    """The tool's operation, given its typed arguments (the type names the tool)."""
    match arguments:
        case SearchArguments():
            return recall.search(deps, call, arguments)
        case GetArguments():
            return recall.get(deps, call, arguments)
        case CaptureArguments():
            return capture.capture(deps, call, arguments)
        case AdmissionArguments():
            return admit.request_admission(deps, call, arguments)
        case WithdrawArguments():
            return removal.withdraw(deps, call, arguments)
        case ForgetArguments():
            return removal.forget(deps, call, arguments)


def _tool(name: str) -> Tool | None:
    try:
        return Tool(name)
    except ValueError:
        return None


class _PinnedPolicy:
    def __init__(self, policy: AdmissionPolicy) -> None:
        self._policy = policy

    def current(self) -> AdmissionPolicy:
        return self._policy


@dataclass(frozen=True, slots=True)
class AgentCall:
    """One agent call as the edge received it: the verified binding (None when there is none)."""

    binding: Binding | None
    tool_name: str
    arguments: object


class AnswersCalls(Protocol):
    """What the MCP server needs of whatever answers agent calls: an Engine, or the host's engines of
    several clusters, each call sent to its tenant's (host/routed_engines.py)."""

    def handle(self, binding: Binding | None, tool_name: str, arguments: object) -> dict[str, Any]: ...

    def handle_group(self, calls: Sequence[AgentCall]) -> list[dict[str, Any] | ProtocolFault]: ...

    def vector_queue_depth(self) -> int: ...


# The tools whose calls may share a commit when they arrive together: the write path an agent repeats
# most, and the one the host import already runs as one transaction.
GROUPED_TOOLS = frozenset({Tool.CAPTURE.value, Tool.REQUEST_ADMISSION.value})
# Records an import lets wait for their vectors before its next batch: the model, not the store, sets an
# import's pace, and what waits holds its payload in memory.
IMPORT_BACKLOG = 20_000


@dataclass(frozen=True, slots=True)
class ImportOutcome:
    """One imported item: the capture's envelope, and the admission's when the capture made a candidate."""

    captured: dict[str, Any]
    admitted: dict[str, Any] | None


class Engine(HostFront):
    """Agents' calls enter by `handle` and `handle_group`; the host's commands by the methods of HostFront."""

    @classmethod
    def assemble(
        cls,
        *,
        store: Store,
        keyring: KeyRing,
        vault: KeyVault,
        policies: PolicySource,
        clock: Clock,
        cursor_key: bytes,
        audit_key: bytes,
        semantic: VectorCache | None = None,
        indexer: VectorIndexer | None = None,
    ) -> Engine:
        """The composition root's way in: the host hands over components, never a Deps of its own."""
        return cls(Deps(store, keyring, vault, policies, clock, cursor_key, audit_key, semantic, indexer))

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.key_sweep = KeySweep()

    def _mac(self, value: Any) -> str:
        data = _AUDIT_ENCODER.encode(value)
        return "hmac-sha256:" + hmac.new(self.deps.audit_key, data.encode("ascii"), hashlib.sha256).hexdigest()

    def handle(self, binding: Binding | None, tool_name: str, arguments: object) -> dict[str, Any]:
        """The envelope for one agent call. Raises ProtocolFault (-32603 / -32602) only."""
        audit_id = new_audit_id()
        tool = _tool(tool_name)
        envelope: dict[str, Any]
        try:
            if binding is None:
                raise trusted_context_unavailable()
            if tool is None or not binding.grants_tool(tool.value):
                raise unknown_tool()
            value = self._execute(binding, tool, arguments)
            envelope = success(value, audit_id)
        except ProtocolFault as fault:
            self._audit(audit_id, binding, tool_name, str(fault.code), arguments, None)
            raise
        except ContractError as error:
            envelope = refusal(error, audit_id)
        except Exception:
            # Logged with its auditId for the host; the agent sees only a constant envelope.
            logger.exception("unexpected fault in %s (auditId %s)", tool_name, audit_id)
            code = ErrorCode.MUTATION_OUTCOME_UNKNOWN if tool in MUTATING_TOOLS else ErrorCode.STORE_UNAVAILABLE
            envelope = failure(code, audit_id)
        outcome = "ok" if envelope["ok"] else envelope["error"]["code"]
        self._audit(audit_id, binding, tool_name, outcome, arguments, envelope)
        return envelope

    def _execute(self, binding: Binding, tool: Tool, arguments: object) -> dict[str, Any]:
        call = Call(binding=binding, now_ms=self.deps.clock.now_ms())
        if binding.expired_at(call.now_ms):
            raise ContractError(ErrorCode.AUTHORIZATION_EXPIRED)
        if self._revoked(binding.token_id):
            raise ContractError(ErrorCode.AUTHORIZATION_REVOKED)
        typed = typed_arguments(tool, validate_arguments(tool, arguments))
        if typed.purpose_ref is not None and typed.purpose_ref != binding.purpose_ref:
            raise trusted_context_unavailable()
        return _operation(self.deps, call, typed)

    def _revoked(self, token_id: str) -> bool:
        """Read on every call, so a revocation takes effect on the next call of a server already running."""
        return self.deps.vault.is_revoked(token_id)

    def _audit(
        self,
        audit_id: str,
        binding: Binding | None,
        tool_name: str,
        outcome: str,
        arguments: object,
        envelope: Mapping[str, Any] | None,
    ) -> None:
        row = AuditRow(
            audit_id=audit_id,
            at_ms=self.deps.clock.now_ms(),
            tool=tool_name[:128],
            outcome=outcome,
            tenant=binding.tenant if binding else None,
            workspace=binding.workspace if binding else None,
            principal=binding.principal if binding else None,
            agent_id=binding.agent_id if binding else None,
            session=binding.session if binding else None,
            token_id=binding.token_id if binding else None,
            request_digest=self._mac(arguments),
            response_digest=None if envelope is None else self._mac(envelope),
        )
        try:
            self.deps.store.append_audit(row)
        except ContractError:
            logger.error("audit row %s could not be written", audit_id)

    def _pinned(self, *, embed_ahead: bool = True) -> Engine:
        """This engine under the policy in force now, for calls sharing one transaction to be decided
        alike (an unreadable policy: this engine, and each call reports it as its own envelope would)."""
        try:
            policies: PolicySource = _PinnedPolicy(self.deps.policies.current())
        except ContractError:
            policies = self.deps.policies
        return Engine(replace(self.deps, policies=policies, embed_ahead=embed_ahead))

    # -- server path: calls that arrive together ---------------------------------------------
    def handle_group(self, calls: Sequence[AgentCall]) -> list[dict[str, Any] | ProtocolFault]:
        """Each call answered exactly as `handle` answers it alone, in order, each seeing what the
        calls before it wrote; but calls of GROUPED_TOOLS share one store commit and one vault commit
        (each still a savepoint of its own, so a failing call rolls back alone). No envelope is sent
        before the shared commit, and when it fails every call of the group gets
        MUTATION_OUTCOME_UNKNOWN: none of them is durable, and each may be sent again with its key.
        A protocol fault comes back in the call's place, for the edge to raise."""
        outcomes: list[dict[str, Any] | ProtocolFault] = []
        start = 0
        while start < len(calls):
            end = start + 1
            if calls[start].tool_name not in GROUPED_TOOLS:
                outcomes.append(self._alone(calls[start]))
                start = end
                continue
            while end < len(calls) and calls[end].tool_name in GROUPED_TOOLS:
                end += 1
            outcomes += self._shared_commit(calls[start:end])
            start = end
        return outcomes

    def _alone(self, call: AgentCall) -> dict[str, Any] | ProtocolFault:
        try:
            return self.handle(call.binding, call.tool_name, call.arguments)
        except ProtocolFault as fault:
            return fault

    def _shared_commit(self, calls: Sequence[AgentCall]) -> list[dict[str, Any] | ProtocolFault]:
        store, vault = self.deps.store, self.deps.vault
        engine = self._pinned()
        outcomes: list[dict[str, Any] | ProtocolFault] = []
        try:
            with store.batch(before_commit=vault.commit_pending), vault.batch():
                for call in calls:
                    _expect_key(store, call.binding, call.arguments)
                outcomes = [engine._alone(call) for call in calls]
        except ContractError:
            logger.error("a shared commit of %d calls failed; none of them is durable", len(calls))
            # A protocol fault wrote nothing, so it stays what it was; every other call's outcome is unknown.
            faults = [outcome if isinstance(outcome, ProtocolFault) else None for outcome in outcomes]
            faults += [None] * (len(calls) - len(faults))
            return [fault or self._unknown_outcome(call) for fault, call in zip(faults, calls, strict=True)]
        vault.run_deferred()
        return outcomes

    def _unknown_outcome(self, call: AgentCall) -> dict[str, Any]:
        audit_id = new_audit_id()
        envelope = failure(ErrorCode.MUTATION_OUTCOME_UNKNOWN, audit_id)
        self._audit(
            audit_id, call.binding, call.tool_name, ErrorCode.MUTATION_OUTCOME_UNKNOWN.value, call.arguments, envelope
        )
        return envelope

    # -- host path: imports ------------------------------------------------------------------
    def import_memories(
        self, binding: Binding | None, items: Sequence[tuple[Mapping[str, Any], str]]
    ) -> list[ImportOutcome]:
        """Host path: for each (capture arguments, admission idempotency key), the capture and then,
        when it committed a candidate, its admission, exactly as the two agent calls (audit rows
        included), but sharing one store commit and one vault commit.

        The envelopes hold only once this returns: it raises ContractError MUTATION_OUTCOME_UNKNOWN
        when the shared commit fails, and the same items with the same keys may then be sent again.
        Protocol faults (an unknown tool, say) propagate as from `handle`.
        """
        outcomes: list[ImportOutcome] = []
        store, vault = self.deps.store, self.deps.vault
        if self.deps.indexer is not None:
            self.deps.indexer.wait_below(IMPORT_BACKLOG)
        # One transaction, one policy: every item is decided under the policy in force when it began
        # (unreadable, each call reports it as its own envelope would); vectors follow on the indexer.
        engine = self._pinned(embed_ahead=False)
        try:
            with store.batch(before_commit=vault.commit_pending), vault.batch():
                if binding is not None:
                    keys = [arguments.get("idempotency_key") for arguments, _ in items]
                    keys += [admission_key for _, admission_key in items]
                    store.expect_idempotency(
                        _scope_of(binding), binding.principal, [key for key in keys if isinstance(key, str)]
                    )
                for arguments, admission_key in items:
                    captured = engine.handle(binding, Tool.CAPTURE.value, arguments)
                    admitted = None
                    if captured["ok"] and captured["output"]["value"].get("candidate_id"):
                        request = {
                            "candidate_id": captured["output"]["value"]["candidate_id"],
                            "idempotency_key": admission_key,
                        }
                        admitted = engine.handle(binding, Tool.REQUEST_ADMISSION.value, request)
                    outcomes.append(ImportOutcome(captured, admitted))
        except ContractError as error:
            raise ContractError(ErrorCode.MUTATION_OUTCOME_UNKNOWN) from error
        vault.run_deferred()
        return outcomes

    # -- host path: the derived indexes -----------------------------------------------------
    def index_status(self) -> IndexStatus:
        """Which scopes wait for a re-index, and how many records for a vector. Raises ContractError."""
        return reindex.index_status(self.deps)

    def reindex(
        self, progress: Callable[[ReindexProgress], None] | None = None, *, embed: bool = True
    ) -> ReindexReport:
        """Moves the lexical index to this tokenizer and (unless `embed` is False) embeds what the model
        lacks (engine/recall/reindex.py). Raises ContractError STORE_UNAVAILABLE, MUTATION_OUTCOME_UNKNOWN;
        running it again resumes."""
        if self.deps.indexer is not None:
            self.deps.indexer.settle()
        return reindex.reindex(self.deps, progress, embed=embed)

    # -- host path: the confirmation queue --------------------------------------------------
    def confirmations(self, *, include_decided: bool = False) -> list[tuple[ConfirmationRow, str]]:
        """Rows with their effective status (requests and approvals lapse with time)."""
        now = self.deps.clock.now_ms()
        with self.deps.store.read() as tx:
            rows = tx.list_confirmations(None if include_decided else ["requested"])
        listed = [(row, effective_status(row, now)) for row in rows]
        return listed if include_decided else [item for item in listed if item[1] == "requested"]

    def approve_confirmation(self, confirmation_id: str, *, decided_by: str, ttl_ms: int) -> ConfirmationRow:
        """Raises ConfirmationError with a one-line reason."""
        with self.deps.store.write() as tx:
            return approve(tx, confirmation_id, now_ms=self.deps.clock.now_ms(), decided_by=decided_by, ttl_ms=ttl_ms)

    def deny_confirmation(self, confirmation_id: str, *, decided_by: str) -> ConfirmationRow:
        """Raises ConfirmationError with a one-line reason."""
        with self.deps.store.write() as tx:
            return deny(tx, confirmation_id, now_ms=self.deps.clock.now_ms(), decided_by=decided_by)


def _scope_of(binding: Binding) -> Scope:
    return Scope(tenant=binding.tenant, workspace=binding.workspace)


def _expect_key(store: Store, binding: Binding | None, arguments: object) -> None:
    """Tells the store the key a grouped call will look up (a hint: arguments are validated later)."""
    key = arguments.get("idempotency_key") if isinstance(arguments, Mapping) else None
    if binding is not None and isinstance(key, str):
        store.expect_idempotency(_scope_of(binding), binding.principal, [key])


__all__ = ["GROUPED_TOOLS", "AgentCall", "ConfirmationError", "Engine", "ImportOutcome"]
