"""Capture: a cited candidate, sealed under its own data key, pending and invisible.

Nothing captured is searchable or readable until admission accepts it; the secret detector runs
here, on the plaintext, and its findings (categories only) wait for the admission decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from engram_memory.contract.arguments import CaptureArguments
from engram_memory.contract.canonical import EVIDENCE_DOMAIN, PAYLOAD_DOMAIN, canonical_json, digest
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.ids import new_candidate_id
from engram_memory.contract.instants import format_instant, parse_instant
from engram_memory.contract.schema_faults import SchemaFault, describe
from engram_memory.contract.states import CandidateState
from engram_memory.contract.tools import Tool
from engram_memory.engine import journal
from engram_memory.engine.admission.policy import AdmissionPolicy, TimeBounds
from engram_memory.engine.calls import Call
from engram_memory.engine.deps import Deps
from engram_memory.engine.idempotency import replayed_response
from engram_memory.engine.lifecycle.gate import GateHeld, GatePass, GateRequest, check_gate, consume
from engram_memory.engine.mutation import append_event, remember_response, run_mutation
from engram_memory.engine.ports.agent_tx import ConfirmationsTx
from engram_memory.engine.ports.store import CandidateRow, JournalEvent, Scope, StoreTx
from engram_memory.engine.receipts import transaction_receipt_digest
from engram_memory.engine.sealing.seal import seal
from engram_memory.engine.secrets import SecretFinding, scan_value, secret_categories

DAY_MS = 86_400_000
DEFAULT_RETENTION = MappingProxyType({"derivative_rule": "make-ineligible"})
CAPTURE_TARGET = "capture"


def resolve_retention(
    retention: Mapping[str, Any] | None, policy: AdmissionPolicy, principal: str, now_ms: int
) -> dict[str, Any]:
    """The retention the record will keep for ever, replays included.

    Raises ContractError UNAUTHORIZED (retain without permission, expiry past the host's cap) or
    INVALID_SCHEMA (expiry not after capture time).
    """
    if retention is None:
        return dict(DEFAULT_RETENTION)
    if retention["derivative_rule"] == "retain" and not policy.may_retain(principal):
        raise ContractError(ErrorCode.UNAUTHORIZED)
    if "expires_at" in retention:
        expires_at = parse_instant(retention["expires_at"])
        if expires_at is None or expires_at <= now_ms:
            fault = SchemaFault("/payload/retention/expires_at", "time", "must be after the time of the capture")
            raise ContractError(ErrorCode.INVALID_SCHEMA, detail=fault.sentence())
        if expires_at > now_ms + policy.max_retention_days * DAY_MS:
            raise ContractError(ErrorCode.UNAUTHORIZED)
    return dict(retention)


_TIMES = (("valid_time", "t"), ("valid_time", "t_end"), ("primary_event", "at"))


def check_times(payload: Mapping[str, Any], bounds: TimeBounds) -> None:
    """Instants the host finds plausible; raises ContractError INVALID_SCHEMA naming the field and why."""
    faults = []
    for part, name in _TIMES:
        value = payload[part].get(name)
        why = None if value is None else bounds.fault(value)
        if why == "seconds":
            words = "epoch milliseconds; this value reads as epoch seconds (multiply seconds by 1000)"
        elif why == "bounds":
            earliest, latest = format_instant(bounds.earliest_ms), format_instant(bounds.latest_ms)
            words = f"epoch milliseconds from {earliest} to {latest} (the host's bounds)"
        else:
            continue
        faults.append(SchemaFault(f"/payload/{part}/{name}", "time", words))
    if faults:
        raise ContractError(ErrorCode.INVALID_SCHEMA, detail=describe(faults))


def check_reconciliation(payload: Mapping[str, Any], policy: AdmissionPolicy) -> dict[str, Any]:
    """Reconciliation families need the host's consent; raises ContractError UNAUTHORIZED."""
    reconciliation = payload.get("reconciliation", {"family_refs": []})
    if not all(policy.consents_to(ref) for ref in reconciliation["family_refs"]):
        raise ContractError(ErrorCode.UNAUTHORIZED)
    return {"family_refs": list(reconciliation["family_refs"])}


def stored_payload(
    payload: Mapping[str, Any], retention: Mapping[str, Any], reconciliation: Mapping[str, Any], scope: Scope
) -> dict[str, Any]:
    """What the store keeps and digests: the agent's payload, resolved defaults, the bound scope."""
    return {
        **payload,
        "retention": dict(retention),
        "reconciliation": dict(reconciliation),
        "scope_ref": scope.ref,
    }


def capture(deps: Deps, call: Call, arguments: CaptureArguments) -> dict[str, Any]:
    """Raises ContractError INVALID_SCHEMA (also for implausible instants), UNAUTHORIZED, DIGEST_CONFLICT,
    POLICY_UNAVAILABLE, gate_failed (when the binding requires confirmation), STORE_UNAVAILABLE,
    MUTATION_OUTCOME_UNKNOWN."""
    policy = deps.policies.current()
    check_times(arguments.payload, policy.times)
    return run_mutation(
        deps,
        call.scope,
        Tool.CAPTURE,
        arguments,
        lambda tx, op_digest: _capture(deps, tx, call, arguments, policy, op_digest),
    )


def _capture(
    deps: Deps,
    tx: StoreTx,
    call: Call,
    arguments: CaptureArguments,
    policy: AdmissionPolicy,
    op_digest: str,
) -> dict[str, Any] | GateHeld:
    scope, key = call.scope, arguments.idempotency_key
    prior = replayed_response(tx.get_idempotency(scope, call.binding.principal, key), Tool.CAPTURE, op_digest)
    if prior is not None:
        return {**prior, "status": "duplicate_exact"}
    payload, evidence = arguments.payload, arguments.evidence
    retention = resolve_retention(payload.get("retention"), policy, call.binding.principal, call.now_ms)
    reconciliation = check_reconciliation(payload, policy)
    kept = stored_payload(payload, retention, reconciliation, scope)
    payload_digest = digest(PAYLOAD_DOMAIN, kept)
    body = canonical_json({"payload": kept, "evidence": evidence})
    gate_pass = (
        _gate(tx, call, payload, payload_digest, op_digest, len(body)) if call.binding.confirm_mutations else None
    )
    if isinstance(gate_pass, GateHeld):
        return gate_pass
    findings = scan_value({"payload": payload, "evidence": evidence}, categories=policy.secret_categories)
    candidate_id, event = _new_candidate(deps, tx, call, payload, evidence, payload_digest, body, findings)
    response = {
        "status": "committed_pending",
        "candidate_id": candidate_id,
        "record_digest": payload_digest,
        "cursor": event.cursor,
        "transaction_receipt_digest": transaction_receipt_digest(Tool.CAPTURE.value, key, [event]),
    }
    if gate_pass is not None:
        consume(tx, gate_pass, deps.clock.now_ms())
    remember_response(tx, call, Tool.CAPTURE, arguments, op_digest, CAPTURE_TARGET, response)
    return response


def _gate(
    tx: ConfirmationsTx, call: Call, payload: Mapping[str, Any], payload_digest: str, op_digest: str, size: int
) -> GatePass | GateHeld:
    """A binding that confirms mutations: the person's approval of this very capture, or a request for it."""
    summary = {
        "operation": "capture",
        "record_digest": payload_digest,
        "components": len(payload["components"]),
        "citations": len(payload["citations"]),
        "bytes": size,
    }
    gate = GateRequest(call.scope, call.actor, Tool.CAPTURE.value, payload_digest, op_digest, None, summary)
    return check_gate(tx, gate, call.now_ms)


def _new_candidate(
    deps: Deps,
    tx: StoreTx,
    call: Call,
    payload: Mapping[str, Any],
    evidence: Mapping[str, Any],
    payload_digest: str,
    body: bytes,
    findings: Sequence[SecretFinding],
) -> tuple[str, JournalEvent]:
    """The pending candidate: its journal event, its row and its sealed body."""
    scope = call.scope
    candidate_id = new_candidate_id()
    event = append_event(
        tx,
        call,
        journal.CANDIDATE_CAPTURED,
        {
            "candidate_id": candidate_id,
            "payload_digest": payload_digest,
            "evidence_digest": digest(EVIDENCE_DOMAIN, evidence),
        },
    )
    tx.insert_candidate(
        CandidateRow(
            scope=scope,
            candidate_id=candidate_id,
            state=CandidateState.PENDING.value,
            payload_digest=payload_digest,
            evidence_digest=event.body["data"]["evidence_digest"],
            actor=call.actor,
            captured_at_ms=call.now_ms,
            capture_cursor=event.cursor,
            size_bytes=len(body),
            citation_count=len(payload["citations"]),
            has_attestation="attestation" in evidence,
            secret_categories=tuple(secret_categories(findings)),
            trust_class=call.binding.trust_class,
        )
    )
    tx.put_body(
        scope, candidate_id, seal(deps.keyring, deps.vault, scope, candidate_id, "candidate", body, call.now_ms)
    )
    return candidate_id, event
