"""The authorization server's HTTP surface: the SDK's endpoints (RFC 8414 metadata, authorize, token, RFC 7591
registration, RFC 7009 revocation) over this host's provider, and the sign-in pages.

Two adjustments to the SDK's defaults: the metadata says the authorization response carries `iss`
(RFC 9207, which the consent page adds) and that token and revocation requests authenticate with no client
secret (public clients, PKCE); a registration that names no token endpoint method is registered as a public
client (RFC 7591 lets the server replace what a client asked for), one that asks for a secret is refused.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.routes import build_metadata, cors_middleware, create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthMetadata
from pydantic import AnyHttpUrl
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram_memory.contract.tools import ALL_TOOLS
from engram_memory.host.oauth.pages import SignInPages
from engram_memory.host.oauth.provider import HostAuthorizationProvider
from engram_memory.host.oauth.service import SignInService

METADATA_PATH = "/.well-known/oauth-authorization-server"
REGISTRATION_PATH = "/register"
REVOCATION_PATH = "/revoke"
MAX_REGISTRATION_BYTES = 64 * 1024
SCOPES = [tool.value for tool in ALL_TOOLS]


class PublicByDefault:
    """Registers a client that names no token endpoint method as a public one (`none`), before the SDK's
    handler would default it to a client secret this server does not keep."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body = _public_unless_asked(await _body(receive))
        await self.app(scope, _replay(body), send)


class WithoutSecret:
    """A public client's revocation request carries no `client_secret`, which the SDK's request model (2.3)
    requires anyway: an empty one is added to a form that lacks it (the authenticator then checks none)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body = await _body(receive)
        if b"client_secret=" not in body and len(body) <= MAX_REGISTRATION_BYTES:
            body += b"&client_secret=" if body else b"client_secret="
        await self.app(scope, _replay(body), send)


async def _body(receive: Receive) -> bytes:
    body = b""
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = bool(message.get("more_body")) and len(body) <= MAX_REGISTRATION_BYTES
    return body


def _replay(body: bytes) -> Receive:
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return receive


def _public_unless_asked(body: bytes) -> bytes:
    try:
        metadata: Any = json.loads(body)
    except (ValueError, RecursionError):
        return body  # the SDK's handler answers invalid_client_metadata
    if isinstance(metadata, dict) and metadata.get("token_endpoint_auth_method") is None:
        metadata["token_endpoint_auth_method"] = "none"  # noqa: S105 - a method's name, not a password
        return json.dumps(metadata).encode("utf-8")
    return body


def authorization_routes(service: SignInService, *, secure_cookie: bool, loopback: bool) -> list[BaseRoute]:
    """`loopback`: this server is on a loopback address (development), so a client's metadata document may be
    too; otherwise only public addresses are fetched."""
    provider = HostAuthorizationProvider(service, loopback_documents=loopback)
    issuer = AnyHttpUrl(service.settings.issuer)
    registration = ClientRegistrationOptions(enabled=True, valid_scopes=SCOPES, default_scopes=SCOPES)
    revocation = RevocationOptions(enabled=True)
    metadata = build_metadata(issuer, None, registration, revocation)
    metadata.scopes_supported = SCOPES
    metadata.token_endpoint_auth_methods_supported = ["none"]
    metadata.revocation_endpoint_auth_methods_supported = ["none"]
    metadata.authorization_response_iss_parameter_supported = True
    metadata.client_id_metadata_document_supported = True
    # The issuer exactly as the pages send it in `iss` (RFC 9207 compares strings): no trailing slash.
    metadata = OAuthMetadata.model_validate({**metadata.model_dump(mode="json"), "issuer": service.settings.issuer})
    routes: list[BaseRoute] = []
    for sdk_route in create_auth_routes(
        provider, issuer, client_registration_options=registration, revocation_options=revocation
    ):
        if sdk_route.path == METADATA_PATH:
            handler = cors_middleware(MetadataHandler(metadata).handle, ["GET", "OPTIONS"])
            routes.append(Route(METADATA_PATH, endpoint=handler, methods=["GET", "OPTIONS"]))
        elif sdk_route.path == REGISTRATION_PATH:
            public = PublicByDefault(sdk_route.app)
            routes.append(Route(REGISTRATION_PATH, endpoint=public, methods=["POST", "OPTIONS"]))
        elif sdk_route.path == REVOCATION_PATH:
            routes.append(Route(REVOCATION_PATH, endpoint=WithoutSecret(sdk_route.app), methods=["POST", "OPTIONS"]))
        else:
            routes.append(sdk_route)
    return [*routes, *SignInPages(service, secure_cookie=secure_cookie).routes()]
