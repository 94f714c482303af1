"""Receipt digests: small, verifiable statements of what was authorised, decided and committed.

Each is a domain-separated digest over ids, digests and instants only, never memory text.
"""

from __future__ import annotations

from collections.abc import Sequence

from engram_memory.contract.canonical import (
    AUTHORIZATION_DOMAIN,
    DECISION_DOMAIN,
    TRANSACTION_DOMAIN,
    digest,
    digest_bytes,
)
from engram_memory.engine.admission.decision import Decision
from engram_memory.engine.calls import Call
from engram_memory.engine.ports.store import JournalEvent


def key_digest(idempotency_key: str) -> str:
    return digest_bytes("engram-memory/idempotency-key/v1", idempotency_key.encode("utf-8"))


def transaction_receipt_digest(tool: str, idempotency_key: str, events: Sequence[JournalEvent]) -> str:
    return digest(
        TRANSACTION_DOMAIN,
        {
            "tool": tool,
            "idempotency_key_digest": key_digest(idempotency_key),
            "events": [{"cursor": event.cursor, "event_digest": event.event_digest} for event in events],
        },
    )


def authorization_receipt_digest(call: Call, tool: str, confirmation_id: str | None = None) -> str:
    binding = call.binding
    statement: dict[str, object] = {
        "token_id": binding.token_id,
        "tenant": binding.tenant,
        "workspace": binding.workspace,
        "principal": binding.principal,
        "agent_id": binding.agent_id,
        "session": binding.session,
        "purpose_ref": binding.purpose_ref,
        "tool": tool,
        "checked_at": call.now_ms,
    }
    if confirmation_id is not None:
        statement["confirmation_id"] = confirmation_id
    return digest(AUTHORIZATION_DOMAIN, statement)


def decision_receipt_digest(candidate_id: str, decision: Decision, decided_at_ms: int) -> str:
    statement: dict[str, object] = {
        "candidate_id": candidate_id,
        "verdict": decision.verdict.value,
        "reasons": list(decision.reasons),
        "policy_id": decision.policy_id,
        "policy_version": decision.policy_version,
        "policy_digest": decision.policy_digest,
        "duplicate_of": decision.duplicate_of,
        "decided_at": decided_at_ms,
    }
    if decision.supersedes:  # only then: a decision without families keeps the statement it always had
        statement["supersedes"] = list(decision.supersedes)
    return digest(DECISION_DOMAIN, statement)
