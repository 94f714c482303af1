"""A request too large for a tool call, answered in words an agent can act on.

The SDK's own limit answers a bare `413 Request body too large`, which clients show as a transport failure
with nothing to fix. A body whose declared length is over the limit gets, instead, a JSON-RPC error that
names the limit, the contract's code and where the fault is (the whole arguments object: JSON pointer
""), before a byte of it is read. Bodies sent without a length still meet the SDK's limit.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

from engram_memory.contract.errors import ErrorCode
from engram_memory.contract.schemas import MAX_ARGUMENT_BYTES
from engram_memory.mcp.asgi_bodies import send_json
from engram_memory.mcp.server import FAULT_META_KEY

INVALID_REQUEST = -32600


def too_large_body(limit_bytes: int) -> bytes:
    message = (
        f"{ErrorCode.INVALID_SCHEMA.value}: the request body is over {limit_bytes:,} bytes. At the top level "
        f'(JSON pointer ""): the whole arguments object of a tool call is at most {MAX_ARGUMENT_BYTES:,} UTF-8 '
        "bytes: store less text per call (split it into several memories)."
    )
    error = {
        "code": INVALID_REQUEST,
        "message": message,
        "data": {FAULT_META_KEY: {"pointer": "", "rule": "max-bytes"}, "max_bytes": MAX_ARGUMENT_BYTES},
    }
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}).encode("utf-8")


def _declared_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class DeclaredSizeLimit:
    def __init__(self, app: ASGIApp, limit_bytes: int) -> None:
        self.app = app
        self._limit = limit_bytes
        self._body = too_large_body(limit_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        declared = _declared_length(scope) if scope["type"] == "http" else None
        if declared is None or declared <= self._limit:
            await self.app(scope, receive, send)
            return
        await send_json(send, 413, self._body, (b"connection", b"close"))
