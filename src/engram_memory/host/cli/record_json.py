"""A record's metadata as the host's record commands print it: ids, states, digests and instants."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from engram_memory.contract.instants import format_instant
from engram_memory.engine.ports.store import RecordRow
from engram_memory.host.language.catalogue import N_

# `records show`'s field names: in English the JSON's own keys, in other languages their words.
FIELDS = MappingProxyType(
    {
        name: name
        for name in (
            N_("record_id"),
            N_("tenant"),
            N_("workspace"),
            N_("state"),
            N_("record_digest"),
            N_("candidate_id"),
            N_("trust_class"),
            N_("principal"),
            N_("agent_id"),
            N_("session"),
            N_("captured_at"),
            N_("admitted_at"),
            N_("valid_from"),
            N_("valid_to"),
            N_("expires_at"),
            N_("state_cursor"),
            N_("superseded_by"),
        )
    }
)


def instant(epoch_ms: int | None) -> str | None:
    return None if epoch_ms is None else format_instant(epoch_ms)


def record_json(row: RecordRow) -> dict[str, Any]:
    """Metadata only: ids, states, digests and instants, never a word of the memory."""
    return {
        "record_id": row.record_id,
        "tenant": row.scope.tenant,
        "workspace": row.scope.workspace,
        "state": row.state,
        "record_digest": row.payload_digest,
        "candidate_id": row.candidate_id,
        "trust_class": row.trust_class,
        "principal": row.actor.principal,
        "agent_id": row.actor.agent_id,
        "session": row.actor.session,
        "captured_at": format_instant(row.captured_at_ms),
        "admitted_at": format_instant(row.admitted_at_ms),
        "valid_from": instant(row.valid_from_ms),
        "valid_to": instant(row.valid_to_ms),
        "expires_at": instant(row.expires_at_ms),
        "state_cursor": row.state_cursor,
        "superseded_by": row.superseded_by,
    }
