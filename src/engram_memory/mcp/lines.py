"""One request line of the stdio wire: a message for the server, or the answer JSON-RPC owes the client.

A client whose line cannot be read must not wait forever. JSON-RPC 2.0 answers text that is not
JSON (or not UTF-8) with -32700 and JSON that is not a request object with -32600, with the request's
id when one can be read and null otherwise. MCP sends no batches, so an array is one -32600. A
notification (no id) is never answered, even when the server cannot use it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import mcp_types as types
from mcp.shared.message import SessionMessage

__all__ = ["Reply", "handshake_refusal", "read_line", "refused_line", "too_long"]


@dataclass(frozen=True, slots=True)
class Reply:
    """A line to write back at once; the server never sees what caused it."""

    line: bytes
    reason: str


def _error_line(code: int, message: str, request_id: int | str | None = None) -> bytes:
    error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message))
    return error.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n"


_PARSE_ERROR = Reply(_error_line(types.PARSE_ERROR, "Parse error"), "a line that is not JSON")
_TOO_LONG = Reply(_error_line(types.INVALID_REQUEST, "Request too large"), "a line over the length limit")


def too_long() -> Reply:
    return _TOO_LONG


# The contract's message for a missing or unusable binding; at initialize it is followed by why.
UNAVAILABLE = "Trusted invocation context unavailable"


# The requests that open a connection: the handshake of the protocol's first era and the probe of its
# 2026 era (a client that probes first falls back to the handshake when the probe fails).
HANDSHAKES = frozenset({"initialize", "server/discover"})


def handshake_refusal(message: SessionMessage, refusal: Callable[[], str | None]) -> types.JSONRPCError | None:
    """The answer to a handshake (`initialize`, `server/discover`) of a server without a usable binding
    (`refusal` gives why, and is asked only of a handshake): -32603 naming the reason, so the client shows
    a failed connection and why, not a server that works. Any other message, or no reason: None."""
    request = message.message
    if not isinstance(request, types.JSONRPCRequest) or request.method not in HANDSHAKES:
        return None
    reason = refusal()
    if reason is None:
        return None
    error = types.ErrorData(code=types.INTERNAL_ERROR, message=f"{UNAVAILABLE}: {reason}")
    return types.JSONRPCError(jsonrpc="2.0", id=request.id, error=error)


def refused_line(error: types.JSONRPCError) -> Reply:
    return Reply(
        error.model_dump_json(by_alias=True, exclude_unset=True).encode("utf-8") + b"\n",
        "a handshake without a usable binding",
    )


def _request_id(value: object) -> int | str | None:
    if not isinstance(value, dict):
        return None
    request_id = value.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, int | str):
        return None
    if isinstance(request_id, str) and not _encodable(request_id):
        return None
    return request_id


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_notification(value: object) -> bool:
    """A notification has no id at all: `"id": null` (or true, or 2.5) is a request with a bad id,
    which the SDK's parser would otherwise take for a notification and leave unanswered."""
    return isinstance(value, dict) and "id" not in value and value.get("jsonrpc") == "2.0" and "method" in value


def _message(line: bytes) -> SessionMessage | None:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except (ValueError, RecursionError):  # pydantic's ValidationError is a ValueError
        return None


def read_line(line: bytes) -> SessionMessage | Reply | None:
    """What to do with one line (its newline included or not): None for a blank line or a
    notification the server cannot use."""
    if not line.strip():
        return None
    message = _message(line)
    if message is not None and not isinstance(message.message, types.JSONRPCNotification):
        return message
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested past what a parser takes
        return _PARSE_ERROR
    if _is_notification(value):
        return message  # None when the server could not use it: a notification is never answered
    request_id = _request_id(value)
    reason = "a JSON-RPC batch" if isinstance(value, list) else "JSON that is not a JSON-RPC request"
    return Reply(_error_line(types.INVALID_REQUEST, "Invalid Request", request_id), reason)
