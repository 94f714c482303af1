"""The lifecycle table of SPEC §5, checked exhaustively: every cell is legal, terminal or illegal."""

from __future__ import annotations

import itertools

import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.states import (
    CandidateState,
    Operation,
    RecordState,
    candidate_transition,
    record_transition,
)

C, R, Op = CandidateState, RecordState, Operation

LEGAL_RECORD = {
    (Op.DISPUTE, R.ACCEPTED_CURRENT): {R.ACCEPTED_DISPUTED},
    (Op.RESOLVE_DISPUTE, R.ACCEPTED_DISPUTED): {R.ACCEPTED_CURRENT, R.HISTORICAL},
    (Op.SUPERSEDE, R.ACCEPTED_CURRENT): {R.HISTORICAL},
    (Op.SUPERSEDE, R.ACCEPTED_DISPUTED): {R.HISTORICAL},
    (Op.MARK_NON_CURRENT, R.ACCEPTED_CURRENT): {R.HISTORICAL},
    (Op.MARK_NON_CURRENT, R.ACCEPTED_DISPUTED): {R.HISTORICAL},
    (Op.REWIND, R.HISTORICAL): {R.ACCEPTED_CURRENT},
    (Op.EXPIRE, R.ACCEPTED_CURRENT): {R.EXPIRED},
    (Op.EXPIRE, R.ACCEPTED_DISPUTED): {R.EXPIRED},
    (Op.EXPIRE, R.HISTORICAL): {R.EXPIRED},
    (Op.TRUST_INVALIDATE, R.ACCEPTED_CURRENT): {R.TRUST_INVALID},
    (Op.TRUST_INVALIDATE, R.ACCEPTED_DISPUTED): {R.TRUST_INVALID},
    (Op.TRUST_INVALIDATE, R.HISTORICAL): {R.TRUST_INVALID},
    **{(Op.TOMBSTONE, state): {R.TOMBSTONED} for state in R if state is not R.TOMBSTONED},
}
LEGAL_CANDIDATE = {
    (Op.ACCEPT, C.PENDING): C.ACCEPTED_CURRENT,
    (Op.REJECT, C.PENDING): C.REJECTED,
    (Op.WITHDRAW, C.PENDING): C.WITHDRAWN,
}


@pytest.mark.parametrize(("operation", "state"), list(itertools.product(Op, R)))
def test_record_transition_matches_spec_table(operation: Operation, state: RecordState) -> None:
    allowed = LEGAL_RECORD.get((operation, state))
    if state is R.TOMBSTONED:
        with pytest.raises(ContractError) as caught:
            record_transition(operation, state)
        assert caught.value.code is ErrorCode.ALREADY_TERMINAL
    elif allowed is None:
        with pytest.raises(ContractError) as caught:
            record_transition(operation, state)
        assert caught.value.code is ErrorCode.ILLEGAL_TRANSITION
    elif len(allowed) == 1:
        assert record_transition(operation, state) in allowed
    else:
        for target in allowed:
            assert record_transition(operation, state, target) is target
        with pytest.raises(ContractError):
            record_transition(operation, state)


def test_record_transition_refuses_a_target_outside_the_table() -> None:
    with pytest.raises(ContractError) as caught:
        record_transition(Op.RESOLVE_DISPUTE, R.ACCEPTED_DISPUTED, R.EXPIRED)
    assert caught.value.code is ErrorCode.ILLEGAL_TRANSITION


@pytest.mark.parametrize(("operation", "state"), list(itertools.product(Op, C)))
def test_candidate_transition_matches_spec_table(operation: Operation, state: CandidateState) -> None:
    expected = LEGAL_CANDIDATE.get((operation, state))
    if state in (C.REJECTED, C.WITHDRAWN):
        with pytest.raises(ContractError) as caught:
            candidate_transition(operation, state)
        assert caught.value.code is ErrorCode.ALREADY_TERMINAL
    elif expected is None:
        with pytest.raises(ContractError) as caught:
            candidate_transition(operation, state)
        assert caught.value.code is ErrorCode.ILLEGAL_TRANSITION
    else:
        assert candidate_transition(operation, state) is expected
