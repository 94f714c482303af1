"""The lifecycle as data: the one place that says which transition is legal.

Everything that changes a state asks `candidate_transition` or `record_transition` first, so an
illegal transition is refused before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.tools import Tool


class CandidateState(StrEnum):
    PENDING = "pending"
    ACCEPTED_CURRENT = "accepted_current"
    REJECTED = "rejected"
    WITHDRAWN = "withdrawn"


class RecordState(StrEnum):
    ACCEPTED_CURRENT = "accepted_current"
    ACCEPTED_DISPUTED = "accepted_disputed"
    HISTORICAL = "historical"
    EXPIRED = "expired"
    TRUST_INVALID = "trust_invalid"
    TOMBSTONED = "tombstoned"


class Operation(StrEnum):
    ACCEPT = "accept"
    REJECT = "reject"
    WITHDRAW = "withdraw"
    DISPUTE = "dispute"
    RESOLVE_DISPUTE = "resolve_dispute"
    SUPERSEDE = "supersede"
    MARK_NON_CURRENT = "mark_non_current"
    REWIND = "rewind"
    EXPIRE = "expire"
    TRUST_INVALIDATE = "trust_invalidate"
    TOMBSTONE = "tombstone"


_R = RecordState
_ANY_LIVE_RECORD = frozenset(s for s in RecordState if s is not RecordState.TOMBSTONED)

CANDIDATE_TRANSITIONS: Mapping[Operation, tuple[frozenset[CandidateState], CandidateState]] = MappingProxyType(
    {
        Operation.ACCEPT: (frozenset({CandidateState.PENDING}), CandidateState.ACCEPTED_CURRENT),
        Operation.REJECT: (frozenset({CandidateState.PENDING}), CandidateState.REJECTED),
        Operation.WITHDRAW: (frozenset({CandidateState.PENDING}), CandidateState.WITHDRAWN),
    }
)

RECORD_TRANSITIONS: Mapping[Operation, tuple[frozenset[RecordState], frozenset[RecordState]]] = MappingProxyType(
    {
        Operation.DISPUTE: (frozenset({_R.ACCEPTED_CURRENT}), frozenset({_R.ACCEPTED_DISPUTED})),
        Operation.RESOLVE_DISPUTE: (
            frozenset({_R.ACCEPTED_DISPUTED}),
            frozenset({_R.ACCEPTED_CURRENT, _R.HISTORICAL}),
        ),
        Operation.SUPERSEDE: (
            frozenset({_R.ACCEPTED_CURRENT, _R.ACCEPTED_DISPUTED}),
            frozenset({_R.HISTORICAL}),
        ),
        Operation.MARK_NON_CURRENT: (
            frozenset({_R.ACCEPTED_CURRENT, _R.ACCEPTED_DISPUTED}),
            frozenset({_R.HISTORICAL}),
        ),
        Operation.REWIND: (frozenset({_R.HISTORICAL}), frozenset({_R.ACCEPTED_CURRENT})),
        Operation.EXPIRE: (
            frozenset({_R.ACCEPTED_CURRENT, _R.ACCEPTED_DISPUTED, _R.HISTORICAL}),
            frozenset({_R.EXPIRED}),
        ),
        Operation.TRUST_INVALIDATE: (
            frozenset({_R.ACCEPTED_CURRENT, _R.ACCEPTED_DISPUTED, _R.HISTORICAL}),
            frozenset({_R.TRUST_INVALID}),
        ),
        Operation.TOMBSTONE: (_ANY_LIVE_RECORD, frozenset({_R.TOMBSTONED})),
    }
)

TERMINAL_CANDIDATE_STATES = frozenset({CandidateState.REJECTED, CandidateState.WITHDRAWN})
TERMINAL_RECORD_STATES = frozenset({RecordState.TOMBSTONED})

# The operation each agent tool applies to its target itself (request_admission's outcome is the policy's).
AGENT_OPERATIONS: Mapping[Tool, Operation] = MappingProxyType(
    {Tool.WITHDRAW: Operation.WITHDRAW, Tool.FORGET: Operation.TOMBSTONE}
)
# Who besides an agent tool performs each operation, for docs/lifecycle.md (generated from it).
PERFORMED_BY: Mapping[Operation, str] = MappingProxyType(
    {
        Operation.ACCEPT: "admission policy or the host's review",
        Operation.REJECT: "admission policy or the host's review",
        Operation.DISPUTE: "host",
        Operation.RESOLVE_DISPUTE: "host",
        Operation.SUPERSEDE: "host",
        Operation.MARK_NON_CURRENT: "host",
        Operation.REWIND: "host",
        Operation.EXPIRE: "host or automatic",
        Operation.TRUST_INVALIDATE: "host",
        Operation.TOMBSTONE: "host",
    }
)


def candidate_transition(operation: Operation, current: CandidateState) -> CandidateState:
    """The state `operation` leads to from `current`.

    Raises ContractError ALREADY_TERMINAL (rejected, withdrawn) or ILLEGAL_TRANSITION.
    """
    rule = CANDIDATE_TRANSITIONS.get(operation)
    if current in TERMINAL_CANDIDATE_STATES:
        raise ContractError(ErrorCode.ALREADY_TERMINAL)
    if rule is None or current not in rule[0]:
        raise ContractError(ErrorCode.ILLEGAL_TRANSITION)
    return rule[1]


def record_transition(operation: Operation, current: RecordState, target: RecordState | None = None) -> RecordState:
    """The state `operation` leads to from `current`; `target` picks among several (resolve_dispute).

    Raises ContractError ALREADY_TERMINAL (tombstoned) or ILLEGAL_TRANSITION.
    """
    rule = RECORD_TRANSITIONS.get(operation)
    if current in TERMINAL_RECORD_STATES:
        raise ContractError(ErrorCode.ALREADY_TERMINAL)
    if rule is None or current not in rule[0]:
        raise ContractError(ErrorCode.ILLEGAL_TRANSITION)
    targets = rule[1]
    if target is None:
        if len(targets) != 1:
            raise ContractError(ErrorCode.ILLEGAL_TRANSITION)
        (only,) = targets
        return only
    if target not in targets:
        raise ContractError(ErrorCode.ILLEGAL_TRANSITION)
    return target
