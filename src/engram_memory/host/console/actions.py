"""The host's maintenance operations on one record, as the console offers them: each behind a second step.

The first POST only describes what would happen; the operation runs when the same form comes back
with `confirmed`. Both steps carry the CSRF token, so neither can be forged from elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engram_memory.contract.states import RecordState
from engram_memory.engine.engine import Engine
from engram_memory.engine.lifecycle.host_transitions import MaintenanceOutcome
from engram_memory.host.language.catalogue import N_, _


@dataclass(frozen=True)
class Operation:
    label: str
    explains: str
    needs_successor: bool = False
    optional_replacing: bool = False
    destructive: bool = False


OPERATIONS: dict[str, Operation] = {
    "dispute": Operation(N_("Dispute"), N_("This takes the record out of search until the dispute is resolved.")),
    "resolve_current": Operation(
        N_("Resolve as current"), N_("This ends the dispute: the record is searchable again.")
    ),
    "resolve_historical": Operation(
        N_("Resolve as historical"), N_("This ends the dispute: the record becomes historical.")
    ),
    "supersede": Operation(
        N_("Supersede"),
        N_("This makes the record historical, replaced by a current record of its scope."),
        needs_successor=True,
    ),
    "mark_non_current": Operation(N_("Mark non-current"), N_("This makes the record historical, with no successor.")),
    "rewind": Operation(
        N_("Rewind"),
        N_("This makes a historical record current again, swapping with its replacement."),
        optional_replacing=True,
    ),
    "expire": Operation(N_("Expire"), N_("This ends the record's retention: it is no longer served.")),
    "trust_invalidate": Operation(
        N_("Invalidate trust"), N_("This marks the record as not to be trusted: it is no longer served.")
    ),
    "tombstone": Operation(
        N_("Forget (tombstone)"),
        N_("This destroys the record's body, its data key and its index entries; this cannot be undone."),
        destructive=True,
    ),
}


def runner(
    name: str, record_id: str, *, decided_by: str, reason: str | None, other_id: str | None
) -> Callable[[Engine], MaintenanceOutcome] | None:
    """The engine call for an operation name; None for an unknown name or a missing successor."""
    by, why = decided_by, reason
    calls: dict[str, Callable[[Engine], MaintenanceOutcome]] = {
        "dispute": lambda engine: engine.dispute(record_id, decided_by=by, reason_ref=why),
        "resolve_current": lambda engine: engine.resolve_dispute(
            record_id, to_state=RecordState.ACCEPTED_CURRENT, decided_by=by, reason_ref=why
        ),
        "resolve_historical": lambda engine: engine.resolve_dispute(
            record_id, to_state=RecordState.HISTORICAL, decided_by=by, reason_ref=why
        ),
        "mark_non_current": lambda engine: engine.mark_non_current(record_id, decided_by=by, reason_ref=why),
        "rewind": lambda engine: engine.rewind(record_id, replacing=other_id, decided_by=by, reason_ref=why),
        "expire": lambda engine: engine.expire(record_id, decided_by=by, reason_ref=why),
        "trust_invalidate": lambda engine: engine.trust_invalidate(record_id, decided_by=by, reason_ref=why),
        "tombstone": lambda engine: engine.tombstone(record_id, decided_by=by, reason_ref=why),
    }
    if other_id is not None:
        successor = other_id
        calls["supersede"] = lambda engine: engine.supersede(
            record_id, successor_id=successor, decided_by=by, reason_ref=why
        )
    return calls.get(name)


def outcome_line(outcome: MaintenanceOutcome) -> str:
    moved = [f"{t.record.record_id}: {t.from_state} -> {t.to_state}" for t in outcome.transitions]
    return _("Done. {moves}.").format(moves="; ".join(moved))
