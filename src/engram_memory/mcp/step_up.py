"""Scope step-up for OAuth clients (RFC 6750 §3.1, the MCP authorization spec's `insufficient_scope`).

An OAuth access token carries the tools its person consented to, and the access rules may give that person
more: tools the client did not ask for, or that the rules gave later. A call to such a tool is answered
HTTP 403 `insufficient_scope`, naming the scope to ask for, so the client authorizes again with it (the
SDK's client does so by itself) instead of failing. A tool the rules do not give the person, or any tool
called with a binding from `engram-memory bind`, gets the contract's answer, `-32602 Unknown tool`, as
before: the 403 reveals only what the person could have had anyway. The JSON-RPC body of the 403 is that
same `-32602` error, for a client that does not step up.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.types import ASGIApp, Receive, Scope, Send

from engram_memory.contract.binding import Binding
from engram_memory.contract.tools import ALL_TOOLS
from engram_memory.mcp.asgi_bodies import read_body, replayed, send_json

KNOWN_TOOLS = frozenset(tool.value for tool in ALL_TOOLS)

CouldHave = Callable[[Binding], frozenset[str]]


class StepUp:
    def __init__(self, app: ASGIApp, could_have: CouldHave, challenge: Callable[[Scope], str], limit: int) -> None:
        """`could_have`: the tools the access rules give the person behind an OAuth binding now.
        `challenge`: the WWW-Authenticate value for the request (realm and resource metadata). A body over
        `limit` goes on unread, for the transport to refuse."""
        self.app = app
        self._could_have = could_have
        self._challenge = challenge
        self._limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        binding = _oauth_binding(scope)
        if binding is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, more = await read_body(receive, self._limit)
        called = None if more else _called_tool(body)
        if called is not None and called[0] not in binding.grants:
            could = await anyio.to_thread.run_sync(self._could_have, binding)
            if called[0] in could:
                await self._insufficient(scope, send, binding, called)
                return
        await self.app(scope, replayed(body, more, receive), send)

    async def _insufficient(self, scope: Scope, send: Send, binding: Binding, called: tuple[str, object]) -> None:
        tool, request_id = called
        wanted = " ".join(sorted(binding.grants | {tool}))
        challenge = (
            f'{self._challenge(scope)}, error="insufficient_scope", scope="{wanted}",'
            f' error_description="this token does not grant {tool}: authorize again with this scope"'
        )
        error = {"code": -32602, "message": "Unknown tool"}
        body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}, separators=(",", ":")).encode()
        challenged = (b"www-authenticate", challenge.encode("ascii"))
        await send_json(send, 403, body, challenged, (b"cache-control", b"no-store"))


def _oauth_binding(scope: Scope) -> Binding | None:
    """The binding of a request authenticated with an OAuth access token (one naming its resource)."""
    user = scope.get("user")
    if not isinstance(user, AuthenticatedUser):
        return None
    binding = getattr(user.access_token, "binding", None)
    return binding if isinstance(binding, Binding) and binding.resource is not None else None


def _called_tool(body: bytes) -> tuple[str, object] | None:
    """(the tool a `tools/call` request names, the request's id), for a known tool only."""
    if b"tools/call" not in body:
        return None
    try:
        request = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(request, dict) or request.get("method") != "tools/call":
        return None
    params = request.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    request_id = request.get("id")
    if not isinstance(name, str) or name not in KNOWN_TOOLS or type(request_id) not in (str, int):
        return None
    return name, request_id
