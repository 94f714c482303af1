"""The closed set of outcomes an agent can see: error codes, their retriable flags, constant messages.

Messages are fixed per code so that no id, path, SQL or exception text can ever reach a model.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class ErrorCode(StrEnum):
    """Every code an envelope may carry; nothing else is ever returned."""

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
        ErrorCode.DIGEST_CONFLICT: (
            "The idempotency_key was already used with other content, target or tool: use a new idempotency_key "
            "for a new operation, and the same one only to repeat an identical call."
        ),
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


# When this version returns each code: one line per code, in Markdown, for docs/errors.md (generated from it).
# Never sent to an agent; MESSAGES is what an envelope carries.
WHEN_RETURNED: Mapping[ErrorCode, str] = MappingProxyType(
    {
        ErrorCode.INVALID_SCHEMA: (
            "arguments violate the closed schema, a byte bound, NFC, a cross-reference, `expires_at` is not after "
            "capture, or an instant reads as seconds or lies beyond the host's `[times]` bounds"
        ),
        ErrorCode.INVALID_DIGEST: "the only fault is a digest that is not `sha256:` + 64 lowercase hex",
        ErrorCode.UNAUTHORIZED: (
            "`retain` without permission, `expires_at` past the host's cap, reconciliation families without consent"
        ),
        ErrorCode.AUTHORIZATION_EXPIRED: "the binding's lifetime is over",
        ErrorCode.AUTHORIZATION_REVOKED: "the host revoked the binding (`engram-memory revoke`)",
        ErrorCode.NOT_FOUND: "the target is unknown, in another scope, or (get) not currently eligible",
        ErrorCode.DIGEST_CONFLICT: "the idempotency key was used with other arguments or another tool",
        ErrorCode.ILLEGAL_TRANSITION: "the lifecycle forbids the operation (e.g. admitting an accepted candidate)",
        ErrorCode.ALREADY_TERMINAL: "the target is rejected, withdrawn or tombstoned",
        ErrorCode.MUTATION_OUTCOME_UNKNOWN: (
            "the commit itself failed (for writes that arrived together, their shared commit: none of them is "
            "durable), or an unexpected fault hit a mutation; retry with the same key"
        ),
        ErrorCode.GATE_FAILED: (
            "a human's approval is missing (or was denied); names the recorded request (`confirmation_request_id`)"
        ),
        ErrorCode.STALE_PAGE: "the page cursor does not match the query, parameters, principal or current state",
        ErrorCode.RESULT_TOO_LARGE: "reserved: the schema's bounds keep every response under the limit",
        ErrorCode.PROJECTION_OVERSIZED: "a single record's packet exceeds `max_packet_bytes`",
        ErrorCode.RATE_LIMITED: "reserved (no rate limit in the embedded store)",
        ErrorCode.DEADLINE_EXCEEDED: "reserved",
        ErrorCode.CANCELLED: "reserved",
        ErrorCode.STORE_UNAVAILABLE: (
            "the store could not be opened or locked, a statement failed before commit, or an unexpected fault hit "
            "a read"
        ),
        ErrorCode.FENCE_LOST: "reserved (server deployments)",
        ErrorCode.CURSOR_GAP: "host side: `verify` / `serve`'s start-up check found a missing journal event",
        ErrorCode.POLICY_UNAVAILABLE: "`policy.toml` cannot be read or parsed",
        ErrorCode.POLICY_STALE: (
            "the policy changed between an admission decision and its commit, or the decision took over 300 s"
        ),
        ErrorCode.PROJECTION_STALE: "host side: `verify` found the lexical index out of step with the accepted records",
        ErrorCode.RANKING_UNAVAILABLE: (
            "`minimum_channels: lexical_and_semantic` while no embedding model is installed (the `semantic` extra, "
            "or `ENGRAM_EMBEDDING_MODEL=off`)"
        ),
        ErrorCode.CAPABILITY_UNAVAILABLE: "reserved",
        ErrorCode.JOURNAL_CORRUPT: (
            "host side: `verify` / the start-up check found a changed or unreadable journal row, or tables that "
            "replay does not reproduce (`serve` then refuses to start)"
        ),
        ErrorCode.BLOB_MISSING: (
            "a record's sealed body or its data key in the vault is missing or does not open (also reported by "
            "`verify`)"
        ),
        ErrorCode.REGISTRY_VERSION_UNAVAILABLE: "reserved",
        ErrorCode.BACKUP_INVALID: (
            "host side: `restore` read an archive that is tampered, truncated, extended or not this home's"
        ),
        ErrorCode.RESTORE_REFUSED: (
            "host side: `restore` into a store that holds data, or a restored state that does not verify"
        ),
        ErrorCode.MIGRATION_LEDGER_INVALID: (
            "host side: the store's or vault's migration ledger does not match the bundled migrations"
        ),
    }
)


class ContractError(Exception):
    """A failure the agent sees as an envelope: its code, and for the codes where the agent can act,
    `detail` (where and which rule, appended to the constant message; never a value of the caller's or
    the host's) and `fields` (extra error members the contract names, such as the confirmation request
    of a gate_failed)."""

    def __init__(self, code: ErrorCode, *, detail: str | None = None, fields: Mapping[str, str] | None = None) -> None:
        super().__init__(code.value)
        self.code = code
        self.detail = detail
        self.fields: Mapping[str, str] = MappingProxyType(dict(fields or {}))

    @property
    def retriable(self) -> bool:
        return self.code in RETRIABLE

    @property
    def message(self) -> str:
        return MESSAGES[self.code] if self.detail is None else f"{MESSAGES[self.code]} {self.detail}"


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

PROTOCOL_FAULT_MESSAGES: Mapping[int, str] = MappingProxyType(
    {
        TRUSTED_CONTEXT_UNAVAILABLE_CODE: TRUSTED_CONTEXT_UNAVAILABLE_MESSAGE,
        UNKNOWN_TOOL_CODE: UNKNOWN_TOOL_MESSAGE,
    }
)
# When each protocol fault is returned, in Markdown, for docs/errors.md (generated from it).
PROTOCOL_FAULT_WHEN: Mapping[int, str] = MappingProxyType(
    {
        TRUSTED_CONTEXT_UNAVAILABLE_CODE: (
            "no binding, a binding that does not verify, or a `purpose_ref` other than the bound one"
        ),
        UNKNOWN_TOOL_CODE: "a tool that does not exist or is not granted to this binding",
    }
)


def trusted_context_unavailable() -> ProtocolFault:
    """Missing or unverifiable host context, or a purpose/tenant/principal mismatch."""
    return ProtocolFault(TRUSTED_CONTEXT_UNAVAILABLE_CODE, TRUSTED_CONTEXT_UNAVAILABLE_MESSAGE)


def unknown_tool() -> ProtocolFault:
    """A tool that does not exist and one the binding does not grant look the same."""
    return ProtocolFault(UNKNOWN_TOOL_CODE, UNKNOWN_TOOL_MESSAGE)
