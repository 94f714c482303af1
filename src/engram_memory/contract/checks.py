"""The order in which a tool call's checks run: the first that fails answers the call.

docs/tools.md renders this table ("Order of checks"), and tests/engine/test_order_of_checks.py makes
calls that fail two neighbouring checks at once and expects the earlier one's answer, so the page,
the table and the engine cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType


class Check(StrEnum):
    TRUSTED_CONTEXT = "trusted context"
    GRANT = "grant"
    EXPIRY = "binding expiry"
    REVOCATION = "revocation"
    SCHEMA = "schema"
    PURPOSE = "purpose"
    PLAUSIBLE_TIMES = "plausible instants"
    IDEMPOTENCY = "idempotency"
    TARGET = "target"
    LIFECYCLE = "lifecycle"
    HOST_POLICY = "host policy"
    GATE = "confirmation gate"
    OPERATION = "the operation itself"


ORDER_OF_CHECKS: Mapping[Check, str] = MappingProxyType(
    {
        Check.TRUSTED_CONTEXT: "no verified binding → JSON-RPC `-32603 Trusted invocation context unavailable`",
        Check.GRANT: "a tool not granted, or no such tool → JSON-RPC `-32602 Unknown tool`",
        Check.EXPIRY: "the binding's expiry has passed → `AUTHORIZATION_EXPIRED`",
        Check.REVOCATION: "the host revoked the binding → `AUTHORIZATION_REVOKED`",
        Check.SCHEMA: "the arguments against the tool's schema → `INVALID_SCHEMA` / `INVALID_DIGEST`",
        Check.PURPOSE: "a `purpose_ref` (capture: `payload.purpose_ref`) other than the bound one → `-32603`",
        Check.PLAUSIBLE_TIMES: "for capture, an instant outside the host's bounds (or in seconds) → `INVALID_SCHEMA`",
        Check.IDEMPOTENCY: "same key and arguments → the recorded result; same key, anything else → `DIGEST_CONFLICT`",
        Check.TARGET: "the target in the caller's scope → `NOT_FOUND` (unknown and out of scope look the same)",
        Check.LIFECYCLE: "the target's state → `ALREADY_TERMINAL` / `ILLEGAL_TRANSITION`",
        Check.HOST_POLICY: "for capture, the host's retention and reconciliation rules → `UNAUTHORIZED` /"
        " `INVALID_SCHEMA`",
        Check.GATE: "a withdraw, a forget, or a call of a binding that confirms mutations, without a person's"
        " approval → `gate_failed` (a request is recorded for the host)",
        Check.OPERATION: "in one write transaction of the store; its commit is the answer",
    }
)
