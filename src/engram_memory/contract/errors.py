"""The closed set of outcomes an agent can see: error codes, their retriable flags, constant messages.

Messages are fixed per code so that no id, path, SQL or exception text can ever reach a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class ErrorCode(StrEnum):
    """Every code an envelope may carry (SPEC §13); nothing else is ever returned."""

    INVALID_SCHEMA = "INVALID_SCHEMA"
    INVALID_DIGEST = "INVALID_DIGEST"
    UNAUTHORIZED = "UNAUTHORIZED"
    AUTHORIZATION_EXPIRED = "AUTHORIZATION_EXPIRED"
    AUTHORIZATION_REVOKED = "AUTHORIZATION_REVOKED"
    NOT_FOUND = "NOT_FOUND"
    DIGEST_CONFLICT = "DIGEST_CONFLICT"
    ILLEGAL_TRANSITION = "ILLEGAL_TRANSITION"
    ALREADY_TERMINAL = "ALREADY_TERMINAL"
    MUTATION_OUTCOME_UNKNOWN = "MUTATION_OUTCOME_UNKNOWN"
    GATE_FAILED = "gate_failed"
    STALE_PAGE = "STALE_PAGE"
    RESULT_TOO_LARGE = "RESULT_TOO_LARGE"
    PROJECTION_OVERSIZED = "PROJECTION_OVERSIZED"
    RATE_LIMITED = "RATE_LIMITED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    CANCELLED = "CANCELLED"
    STORE_UNAVAILABLE = "STORE_UNAVAILABLE"
    FENCE_LOST = "FENCE_LOST"
    CURSOR_GAP = "CURSOR_GAP"
    POLICY_UNAVAILABLE = "POLICY_UNAVAILABLE"
    POLICY_STALE = "POLICY_STALE"
    PROJECTION_STALE = "PROJECTION_STALE"
    RANKING_UNAVAILABLE = "RANKING_UNAVAILABLE"
    CAPABILITY_UNAVAILABLE = "CAPABILITY_UNAVAILABLE"
    JOURNAL_CORRUPT = "JOURNAL_CORRUPT"
    BLOB_MISSING = "BLOB_MISSING"
    REGISTRY_VERSION_UNAVAILABLE = "REGISTRY_VERSION_UNAVAILABLE"
    BACKUP_INVALID = "BACKUP_INVALID"
    RESTORE_REFUSED = "RESTORE_REFUSED"
    MIGRATION_LEDGER_INVALID = "MIGRATION_LEDGER_INVALID"


RETRIABLE: frozenset[ErrorCode] = frozenset(
    {
        ErrorCode.MUTATION_OUTCOME_UNKNOWN,
        ErrorCode.RATE_LIMITED,
        ErrorCode.DEADLINE_EXCEEDED,
        ErrorCode.CANCELLED,
        ErrorCode.STORE_UNAVAILABLE,
        ErrorCode.FENCE_LOST,
        ErrorCode.CURSOR_GAP,
        ErrorCode.POLICY_UNAVAILABLE,
        ErrorCode.POLICY_STALE,
        ErrorCode.PROJECTION_STALE,
        ErrorCode.RANKING_UNAVAILABLE,
    }
)

MESSAGES: Mapping[ErrorCode, str] = MappingProxyType(
    {
        ErrorCode.INVALID_SCHEMA: "The arguments do not match the tool's closed input schema.",
        ErrorCode.INVALID_DIGEST: "A digest is not 'sha256:' followed by 64 lowercase hexadecimal digits.",
        ErrorCode.UNAUTHORIZED: "The host's binding or policy does not permit this action.",
        ErrorCode.AUTHORIZATION_EXPIRED: "The host binding for this session has expired.",
        ErrorCode.AUTHORIZATION_REVOKED: "The host binding for this session was revoked.",
        ErrorCode.NOT_FOUND: "The target is not available.",
        ErrorCode.DIGEST_CONFLICT: "The idempotency key was already used with other content, target or tool.",
        ErrorCode.ILLEGAL_TRANSITION: "The lifecycle does not allow this operation in the target's current state.",
        ErrorCode.ALREADY_TERMINAL: "The target is already in a terminal state.",
        ErrorCode.MUTATION_OUTCOME_UNKNOWN: (
            "The store could not confirm whether the change was committed; retry with the same key and arguments."
        ),
        ErrorCode.GATE_FAILED: "This operation needs a human's approval through the host.",
        ErrorCode.STALE_PAGE: "The page cursor no longer matches the query or the stored state.",
        ErrorCode.RESULT_TOO_LARGE: "The result is larger than the response limit.",
        ErrorCode.PROJECTION_OVERSIZED: "A single record is larger than max_packet_bytes.",
        ErrorCode.RATE_LIMITED: "Too many requests; back off and retry.",
        ErrorCode.DEADLINE_EXCEEDED: "The deadline passed before the operation finished; retry.",
        ErrorCode.CANCELLED: "The operation was cancelled; retry.",
        ErrorCode.STORE_UNAVAILABLE: "The store is temporarily unavailable; retry.",
        ErrorCode.FENCE_LOST: "The store's write fence was lost; retry.",
        ErrorCode.CURSOR_GAP: "The journal has a gap; retry later.",
        ErrorCode.POLICY_UNAVAILABLE: "The host's admission policy is unavailable; retry.",
        ErrorCode.POLICY_STALE: "The admission decision was made under an outdated policy; retry.",
        ErrorCode.PROJECTION_STALE: "A derived index is behind the journal; retry.",
        ErrorCode.RANKING_UNAVAILABLE: "A required ranking channel is unavailable; retry or ask for lexical search.",
        ErrorCode.CAPABILITY_UNAVAILABLE: "A required capability is unavailable on this server.",
        ErrorCode.JOURNAL_CORRUPT: "The journal failed verification; service is stopped.",
        ErrorCode.BLOB_MISSING: "A stored body is missing; service is stopped.",
        ErrorCode.REGISTRY_VERSION_UNAVAILABLE: "The required contract version is unavailable.",
        ErrorCode.BACKUP_INVALID: "The backup failed verification.",
        ErrorCode.RESTORE_REFUSED: "The restored state failed verification.",
        ErrorCode.MIGRATION_LEDGER_INVALID: "The schema migration ledger failed verification.",
    }
)


class ContractError(Exception):
    """A failure the agent sees as an envelope; carries only its code, never details."""

    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.value)
        self.code = code

    @property
    def retriable(self) -> bool:
        return self.code in RETRIABLE

    @property
    def message(self) -> str:
        return MESSAGES[self.code]


class ProtocolFault(Exception):
    """A JSON-RPC error rather than an envelope: the call never reached the memory contract."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


TRUSTED_CONTEXT_UNAVAILABLE_CODE = -32603
TRUSTED_CONTEXT_UNAVAILABLE_MESSAGE = "Trusted invocation context unavailable"
UNKNOWN_TOOL_CODE = -32602
UNKNOWN_TOOL_MESSAGE = "Unknown tool"


def trusted_context_unavailable() -> ProtocolFault:
    """Missing or unverifiable host context, or a purpose/tenant/principal mismatch (SPEC §2)."""
    return ProtocolFault(TRUSTED_CONTEXT_UNAVAILABLE_CODE, TRUSTED_CONTEXT_UNAVAILABLE_MESSAGE)


def unknown_tool() -> ProtocolFault:
    """A tool that does not exist and one the binding does not grant look the same."""
    return ProtocolFault(UNKNOWN_TOOL_CODE, UNKNOWN_TOOL_MESSAGE)
