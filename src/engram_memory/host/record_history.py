"""A record's journaled history as the host reads it: one entry per state change, with who and why.

Shared by `records show` and the console's record page.
"""

from __future__ import annotations

from typing import Any

from engram_memory.contract.instants import format_instant
from engram_memory.contract.states import RecordState
from engram_memory.engine import journal
from engram_memory.engine.ports.store import JournalEvent


def history_entry(event: JournalEvent) -> dict[str, Any]:
    data = event.body["data"]
    accepted = event.kind == journal.CANDIDATE_ACCEPTED
    return {
        "cursor": event.cursor,
        "at": format_instant(event.at_ms),
        "operation": "accept" if accepted else data.get("operation"),
        "from_state": None if accepted else data.get("from_state"),
        "to_state": RecordState.ACCEPTED_CURRENT.value if accepted else data.get("to_state"),
        "actor": dict(event.body["actor"]),
        "reason_ref": data.get("reason_ref"),
        "event_id": event.event_id,
        "event_digest": event.event_digest,
    }
