"""The closed set of error codes: exactly these, with these retriable flags and fixed messages."""

from __future__ import annotations

import re

from engram_memory.contract.errors import MESSAGES, RETRIABLE, ContractError, ErrorCode

SPEC_NOT_RETRIABLE = {
    "INVALID_SCHEMA",
    "INVALID_DIGEST",
    "UNAUTHORIZED",
    "AUTHORIZATION_EXPIRED",
    "AUTHORIZATION_REVOKED",
    "NOT_FOUND",
    "DIGEST_CONFLICT",
    "ILLEGAL_TRANSITION",
    "ALREADY_TERMINAL",
    "gate_failed",
    "STALE_PAGE",
    "RESULT_TOO_LARGE",
    "PROJECTION_OVERSIZED",
    "CAPABILITY_UNAVAILABLE",
    "JOURNAL_CORRUPT",
    "BLOB_MISSING",
    "REGISTRY_VERSION_UNAVAILABLE",
    "BACKUP_INVALID",
    "RESTORE_REFUSED",
    "MIGRATION_LEDGER_INVALID",
}
SPEC_RETRIABLE = {
    "MUTATION_OUTCOME_UNKNOWN",
    "RATE_LIMITED",
    "DEADLINE_EXCEEDED",
    "CANCELLED",
    "STORE_UNAVAILABLE",
    "FENCE_LOST",
    "CURSOR_GAP",
    "POLICY_UNAVAILABLE",
    "POLICY_STALE",
    "PROJECTION_STALE",
    "RANKING_UNAVAILABLE",
}


def test_error_codes_are_exactly_the_spec_table() -> None:
    assert {code.value for code in ErrorCode} == SPEC_NOT_RETRIABLE | SPEC_RETRIABLE


def test_retriable_flags_match_the_spec_table() -> None:
    assert {code.value for code in RETRIABLE} == SPEC_RETRIABLE


def test_every_code_has_a_constant_sanitised_message() -> None:
    for code in ErrorCode:
        message = MESSAGES[code]
        assert message and message[0].isupper() and message.endswith(".")
        assert not re.search(r"[{}%]|mem_|cand_|/|\\|SELECT|Traceback", message)


def test_contract_error_exposes_code_message_and_retriable() -> None:
    error = ContractError(ErrorCode.POLICY_STALE)
    assert error.code is ErrorCode.POLICY_STALE
    assert error.retriable is True
    assert error.message == MESSAGES[ErrorCode.POLICY_STALE]
