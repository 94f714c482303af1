"""The host's maintenance operations on one record, as the console offers them: each behind a second step.

The form is made from the engine's table of host operations (engine/lifecycle/host_operations.py): one
choice per operation, one field per argument any of them declares. The first POST only describes what
would happen; the operation runs when the same form comes back with `confirmed`. Both steps carry the
CSRF token, so neither can be forged from elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from engram_memory.engine.lifecycle.host_operations import Argument, HostOperation
from engram_memory.engine.lifecycle.host_transitions import MaintenanceOutcome
from engram_memory.host.language.catalogue import _


def form_arguments(operations: Mapping[str, HostOperation]) -> list[Argument]:
    """Every argument the operations declare, once each, in the order they first appear."""
    seen: dict[str, Argument] = {}
    for operation in operations.values():
        for argument in operation.arguments:
            seen.setdefault(argument.name, argument)
    return list(seen.values())


def outcome_line(outcome: MaintenanceOutcome) -> str:
    moved = [f"{t.record.record_id}: {t.from_state} -> {t.to_state}" for t in outcome.transitions]
    return _("Done. {moves}.").format(moves="; ".join(moved))
