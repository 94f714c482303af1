"""The journal event of each lifecycle transition, built in one place for the agent, the host and restore.

Forget, the host's record commands and a restore that finds a destroyed key all end a record; withdraw and
that same restore end a candidate. Each writes its event and the row it moves here, so the event's data
(and therefore its digest, which `verify` and every later chain check depend on) never differs by path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from engram_memory.contract.states import CandidateState, Operation, RecordState
from engram_memory.engine import journal
from engram_memory.engine.mutation import append_event_as
from engram_memory.engine.ports.agent_tx import CandidatesTx, JournalTx, RecordsTx
from engram_memory.engine.ports.store import CandidateRow, JournalEvent, RecordRow


class TransitionTx(JournalTx, CandidatesTx, RecordsTx, Protocol):
    """A state change and the journal event that tells it."""


def record_transitioned(
    tx: TransitionTx,
    record: RecordRow,
    operation: Operation,
    to_state: RecordState,
    *,
    actor: Mapping[str, str],
    at_ms: int,
    reason_ref: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> JournalEvent:
    """Journals the record's move and sets its state at the event's cursor; the index is the caller's."""
    data: dict[str, Any] = {
        "record_id": record.record_id,
        "operation": operation.value,
        "from_state": record.state,
        "to_state": to_state.value,
        **(extra or {}),
    }
    if reason_ref is not None:
        data["reason_ref"] = reason_ref
    event = append_event_as(tx, record.scope, actor, at_ms, journal.RECORD_TRANSITIONED, data)
    tx.set_record_state(record.scope, record.record_id, to_state.value, event.cursor)
    return event


def candidate_withdrawn(
    tx: TransitionTx,
    candidate: CandidateRow,
    *,
    actor: Mapping[str, str],
    at_ms: int,
    reason_ref: str,
    confirmation_id: str | None = None,
) -> JournalEvent:
    """Journals a pending candidate's withdrawal and ends its row; its body is the caller's to destroy."""
    data: dict[str, Any] = {
        "candidate_id": candidate.candidate_id,
        "from_state": candidate.state,
        "to_state": CandidateState.WITHDRAWN.value,
        "reason_ref": reason_ref,
    }
    if confirmation_id is not None:
        data["confirmation_id"] = confirmation_id
    event = append_event_as(tx, candidate.scope, actor, at_ms, journal.CANDIDATE_WITHDRAWN, data)
    tx.update_candidate(
        candidate.scope,
        candidate.candidate_id,
        state=CandidateState.WITHDRAWN.value,
        adjudication=False,
        record_id=None,
    )
    return event
