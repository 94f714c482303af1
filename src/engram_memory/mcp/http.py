"""MCP over streamable HTTP: the same low-level Server, every request bound by its own host-signed bearer token.

Stateless (no session: any process on the same store can answer any request), JSON responses, and
DNS-rebinding protection when the server listens on a loopback address.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.server import Server
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware, get_access_token
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, BearerAuthBackend
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import ConfigDict
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from engram_memory.contract.binding import Binding
from engram_memory.contract.errors import ProtocolFault, trusted_context_unavailable
from engram_memory.contract.schemas import MAX_ARGUMENT_BYTES
from engram_memory.contract.tools import ALL_TOOLS
from engram_memory.mcp.addresses import is_loopback
from engram_memory.mcp.asgi_bodies import send_json
from engram_memory.mcp.body_limit import DeclaredSizeLimit
from engram_memory.mcp.step_up import CouldHave, StepUp

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"
# Room for the JSON-RPC envelope around the arguments (method, id, name, `_meta` of the modern era).
ENVELOPE_ALLOWANCE_BYTES = 64 * 1024
# An argument object at the contract's limit fits when sent as compact UTF-8 JSON (what the SDK clients send);
# anything larger is refused with HTTP 413 before it is parsed or reaches the engine.
MAX_REQUEST_BODY_BYTES = MAX_ARGUMENT_BYTES + ENVELOPE_ALLOWANCE_BYTES
REALM = "engram-memory"

TokenCheck = Callable[[str], Binding | None]


@dataclass(frozen=True, slots=True)
class Authorization:
    """The authorization server this endpoint names (this host, signing people in), and what its access
    tokens must be for: `resource`, this endpoint's URL (RFC 8707). `revoked` says whether a token id was
    revoked, so that a revoked or expired OAuth token is answered 401 and its client refreshes."""

    issuer: str
    resource: str
    revoked: Callable[[str], bool]
    # Resource-server mode: the binding a token from that (other) issuer stands for, or None.
    external: Callable[[str], Binding | None] | None = None
    # The tools the access rules give the person behind an OAuth binding now (scope step-up: step_up.py).
    could_have: CouldHave | None = None


class BindingAccessToken(AccessToken):
    """The SDK's access token, carrying the binding its signature proved (never rebuilt from headers)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    binding: Binding


class BindingTokenVerifier:
    """The SDK's token-verifier hook: a bearer token is accepted exactly when it is a host-signed binding.

    Expiry is deliberately not judged here: a genuine but expired binding must reach the engine, which
    answers it with the AUTHORIZATION_EXPIRED envelope. So `expires_at` stays unset, or the
    SDK's bearer backend would drop the token as if it were forged.
    """

    def __init__(self, check: TokenCheck, authorization: Authorization | None = None) -> None:
        self._check = check
        self._authorization = authorization

    async def verify_token(self, token: str) -> AccessToken | None:
        binding = self._check(token.strip())
        external = None if self._authorization is None else self._authorization.external
        if binding is None and external is not None:
            binding = await anyio.to_thread.run_sync(external, token.strip())
        if binding is None:
            return None
        if binding.resource is not None and not await self._oauth_token_usable(binding):
            return None
        return BindingAccessToken(
            token=token,
            client_id=binding.agent_id,
            scopes=sorted(binding.grants),
            expires_at=None,
            subject=binding.principal,
            claims={"jti": binding.token_id},
            binding=binding,
        )

    async def _oauth_token_usable(self, binding: Binding) -> bool:
        """An OAuth access token must be for this endpoint, unexpired and unrevoked: else 401, and the client
        refreshes (a binding from `bind` is judged per call instead, answered by an envelope)."""
        authorization = self._authorization
        if authorization is None or binding.resource != authorization.resource:
            return False
        if binding.expired_at(int(time.time() * 1000)):
            return False
        return not await anyio.to_thread.run_sync(authorization.revoked, binding.token_id)


def request_binding(_ctx: ServerRequestContext[Any]) -> Binding | None:
    """The binding of the request being served: set by the bearer middleware for this request only."""
    token = get_access_token()
    return token.binding if isinstance(token, BindingAccessToken) else None


def _trusted_context_error_body() -> bytes:
    fault: ProtocolFault = trusted_context_unavailable()
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": fault.code, "message": fault.message}}
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


# RFC 9728: where a client finds what this protected resource accepts.
RESOURCE_METADATA_PATH = "/.well-known/oauth-protected-resource"
_HOST_VALUE = re.compile(r"[A-Za-z0-9.\-]+(:[0-9]{1,5})?|\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?")


def _origin(scope: Scope) -> str | None:
    """`scheme://host[:port]` of the request as its client addressed it, or None for a Host header that is
    not a plain host name or address (it is echoed in a response header, so nothing else may pass)."""
    host = next((value.decode("latin-1") for name, value in scope.get("headers", []) if name == b"host"), None)
    if host is None or _HOST_VALUE.fullmatch(host) is None:
        return None
    return f"{scope.get('scheme', 'http')}://{host}"


class ResourceMetadata:
    """RFC 9728 protected-resource metadata for `/mcp`, published only when it names an authorization server
    (this host signing people in); otherwise there is none to publish, and the answer is 404 (the bearer
    token is then a binding the host issues out of band, `engram-memory bind`)."""

    def __init__(self, authorization: Authorization | None) -> None:
        self._authorization = authorization

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origin = _origin(scope)
        if self._authorization is None:
            status, body = 404, b""
        elif scope.get("method") not in ("GET", "HEAD") or origin is None:
            status, body = (405 if origin is not None else 400), b""
        else:
            status = 200
            metadata = {
                "resource": self._authorization.resource,
                "authorization_servers": [self._authorization.issuer],
                "scopes_supported": [tool.value for tool in ALL_TOOLS],
                "bearer_methods_supported": ["header"],
                "resource_name": "engram-memory",
            }
            body = json.dumps(metadata, separators=(",", ":")).encode("utf-8")
        headers = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
        if status == 405:
            headers.append((b"allow", b"GET, HEAD"))
        headers.append((b"content-length", str(len(body)).encode("ascii")))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body if scope.get("method") != "HEAD" else b""})


_INVALID = "the token was not signed by this host, or has expired or was revoked"


def bearer_challenge(scope: Scope, *, metadata_published: bool) -> str:
    """`WWW-Authenticate: Bearer` with this server's realm, and its RFC 9728 metadata when it publishes one."""
    challenge = f'Bearer realm="{REALM}"'
    origin = _origin(scope)
    if origin is not None and metadata_published:
        challenge += f', resource_metadata="{origin}{RESOURCE_METADATA_PATH}{MCP_PATH}"'
    return challenge


class RequireBinding:
    """Answers a request without a verified binding before it reaches the MCP transport.

    HTTP 401 with a `WWW-Authenticate: Bearer` challenge, as HTTP authentication requires, naming the
    RFC 9728 metadata (`resource_metadata`), and a JSON-RPC body carrying the contract's `-32603 Trusted
    invocation context unavailable`, which the SDK client surfaces as the request's error.
    """

    def __init__(self, app: ASGIApp, *, metadata_published: bool) -> None:
        self.app = app
        self._body = _trusted_context_error_body()
        self._metadata = metadata_published

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if isinstance(scope.get("user"), AuthenticatedUser):
            await self.app(scope, receive, send)
            return
        presented = any(name == b"authorization" for name, _ in scope.get("headers", []))
        challenge = bearer_challenge(scope, metadata_published=self._metadata)
        if presented:  # RFC 6750 §3.1: only a presented token is "invalid"; a missing one just gets the challenge
            challenge += ', error="invalid_token", error_description="' + _INVALID + '"'
        await send_json(
            send, 401, self._body, (b"www-authenticate", challenge.encode("ascii")), (b"cache-control", b"no-store")
        )


def transport_security(host: str, port: int) -> TransportSecuritySettings:
    """DNS-rebinding protection for a loopback listener: only its own Host and Origin values pass.

    A remote listener sits behind a proxy whose public name this process cannot know; there the bearer
    token (never ambient browser credentials) is what authorises a request.
    """
    if not is_loopback(host):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    literal = host.strip("[]")
    names = {"localhost", f"[{literal}]" if ":" in literal else literal}
    hosts = sorted(f"{name}:{port}" for name in names)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=hosts,
        allowed_origins=[f"http://{value}" for value in hosts],
    )


def build_http_app(
    server: Server[Any],
    check: TokenCheck,
    *,
    host: str,
    port: int,
    extra_routes: Sequence[BaseRoute] = (),
    authorization: Authorization | None = None,
) -> Starlette:
    """The ASGI app serving `server` at /mcp; `check` turns a bearer token into its verified binding or None.

    `server` must have been built with `request_binding` as its binding source. `extra_routes` (the
    host's health checks) are served beside it without a binding: they must reveal nothing.
    """
    manager = StreamableHTTPSessionManager(
        app=server,
        json_response=True,
        stateless=True,
        security_settings=transport_security(host, port),
        max_request_body_size=MAX_REQUEST_BODY_BYTES,
    )
    middleware = [
        Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(BindingTokenVerifier(check, authorization))),
        Middleware(AuthContextMiddleware),
    ]
    metadata = ResourceMetadata(authorization)
    published = authorization is not None
    app: ASGIApp = StreamableHTTPASGIApp(manager)
    if authorization is not None and authorization.could_have is not None:
        challenge = functools.partial(bearer_challenge, metadata_published=True)
        app = StepUp(app, authorization.could_have, challenge, MAX_REQUEST_BODY_BYTES)
    routes: list[BaseRoute] = [
        Route(
            MCP_PATH,
            endpoint=DeclaredSizeLimit(RequireBinding(app, metadata_published=published), MAX_REQUEST_BODY_BYTES),
        ),
        # RFC 9728 §3.1: the metadata of the resource /mcp sits at the well-known path plus /mcp; some clients
        # probe the bare well-known path first.
        Route(RESOURCE_METADATA_PATH + MCP_PATH, endpoint=metadata, methods=["GET", "HEAD"]),
        Route(RESOURCE_METADATA_PATH, endpoint=metadata, methods=["GET", "HEAD"]),
        *extra_routes,
    ]
    return Starlette(routes=routes, middleware=middleware, lifespan=lambda _app: manager.run())
