"""The host's record operations, declared once: what each is called, what it does, what it asks for.

`HostFront.transition`, the `records` commands and the console's maintenance form are all made from
`HOST_OPERATIONS`, so a new operation is one entry here plus its engine function. Labels and help are
English; the host translates them (its message catalogue reads this table).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from engram_memory.contract.states import RecordState
from engram_memory.engine.deps import Deps
from engram_memory.engine.lifecycle import host_transitions as moves
from engram_memory.engine.lifecycle.host_transitions import MaintenanceOutcome, MaintenanceRefused
from engram_memory.engine.refusals import Refusal


@dataclass(frozen=True, slots=True)
class Choice:
    """One value a choice argument may take: what the engine function receives, and its label."""

    value: Any
    label: str


@dataclass(frozen=True, slots=True)
class Argument:
    """One more thing an operation asks for besides the record, the person and the reason.

    `name` is the engine function's keyword and the console form's field; `flag` the command's option.
    Without `choices` it is another record's id.
    """

    name: str
    flag: str
    metavar: str
    label: str
    help: str
    required: bool = False
    choices: Mapping[str, Choice] = field(default_factory=dict)


Run = Callable[..., MaintenanceOutcome]


@dataclass(frozen=True, slots=True)
class HostOperation:
    """`run(deps, record_id, *, decided_by, reason_ref, **arguments)`; `help` is its one line of
    `--help`, `explains` what the console's second step says before the person confirms."""

    name: str
    label: str
    help: str
    explains: str
    run: Run
    arguments: tuple[Argument, ...] = ()
    destructive: bool = False

    @property
    def command(self) -> str:
        return self.name.replace("_", "-")

    def apply(
        self, deps: Deps, record_id: str, *, decided_by: str, reason_ref: str | None, given: Mapping[str, str | None]
    ) -> MaintenanceOutcome:
        """Raises MaintenanceRefused for a missing or unknown argument (nothing written), else as `run`."""
        keywords: dict[str, Any] = {}
        for argument in self.arguments:
            value = given.get(argument.name)
            if value is None:
                if argument.required:
                    raise MaintenanceRefused(Refusal.ARGUMENT_MISSING, operation=self.name, flag=argument.flag)
                continue
            if argument.choices:
                choice = argument.choices.get(value)
                if choice is None:
                    choices = ", ".join(argument.choices)
                    raise MaintenanceRefused(Refusal.CHOICE_UNKNOWN, flag=argument.flag, choices=choices)
                keywords[argument.name] = choice.value
            else:
                keywords[argument.name] = value
        return self.run(deps, record_id, decided_by=decided_by, reason_ref=reason_ref, **keywords)


_SUCCESSOR = Argument(
    "successor_id", "--by", "SUCCESSOR", "Successor", "The current record that replaces it.", required=True
)
_REPLACING = Argument(
    "replacing", "--replacing", "ID", "Replaced record", "The current record to swap out (default: its successor)."
)
_RESOLVE_TO = Argument(
    "to_state",
    "--to",
    "current|historical",
    "Resolve to",
    "current (searchable again) or historical.",
    required=True,
    choices={
        "current": Choice(RecordState.ACCEPTED_CURRENT, "current (searchable again)"),
        "historical": Choice(RecordState.HISTORICAL, "historical"),
    },
)


def declare(*declared: HostOperation) -> Mapping[str, HostOperation]:
    """The table, by name, in the order given (the order commands and the console list them in)."""
    return MappingProxyType({operation.name: operation for operation in declared})


HOST_OPERATIONS: Mapping[str, HostOperation] = declare(
    HostOperation(
        "dispute",
        "Dispute",
        "accepted_current -> accepted_disputed: out of search until resolved.",
        "This takes the record out of search until the dispute is resolved.",
        moves.dispute,
    ),
    HostOperation(
        "resolve",
        "Resolve the dispute",
        "accepted_disputed -> accepted_current or historical.",
        "This ends the dispute: the record becomes current (searchable again) or historical.",
        moves.resolve,
        (_RESOLVE_TO,),
    ),
    HostOperation(
        "supersede",
        "Supersede",
        "accepted_current | accepted_disputed -> historical, replaced by a current record of the same scope.",
        "This makes the record historical, replaced by a current record of its scope.",
        moves.supersede,
        (_SUCCESSOR,),
    ),
    HostOperation(
        "mark_non_current",
        "Mark non-current",
        "accepted_current | accepted_disputed -> historical, with no successor.",
        "This makes the record historical, with no successor.",
        moves.mark_non_current,
    ),
    HostOperation(
        "rewind",
        "Rewind",
        "historical -> accepted_current, swapping atomically with the current record that replaced it.",
        "This makes a historical record current again, swapping with its replacement.",
        moves.rewind,
        (_REPLACING,),
    ),
    HostOperation(
        "expire",
        "Expire",
        "accepted_current | accepted_disputed | historical -> expired.",
        "This ends the record's retention: it is no longer served.",
        moves.expire,
    ),
    HostOperation(
        "trust_invalidate",
        "Invalidate trust",
        "accepted_current | accepted_disputed | historical -> trust_invalid.",
        "This marks the record as not to be trusted: it is no longer served.",
        moves.trust_invalidate,
    ),
    HostOperation(
        "tombstone",
        "Forget (tombstone)",
        "Any live state -> tombstoned: forget's erasure, decided by the host (needs --yes).",
        "This destroys the record's body, its data key and its index entries; this cannot be undone.",
        moves.tombstone,
        destructive=True,
    ),
)


def named(name: str) -> HostOperation:
    """Raises MaintenanceRefused for a name the table does not declare."""
    operation = HOST_OPERATIONS.get(name)
    if operation is None:
        raise MaintenanceRefused(Refusal.NO_SUCH_OPERATION, operation=name)
    return operation
