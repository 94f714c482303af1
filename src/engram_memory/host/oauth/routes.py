"""The authorization server's HTTP surface: the SDK's endpoints (RFC 8414 metadata, authorize, token, RFC 7591
registration, RFC 7009 revocation) over this host's provider, and the sign-in pages.

Two adjustments to the SDK's defaults: the metadata says the authorization response carries `iss`
(RFC 9207, which the consent page adds) and that token and revocation requests authenticate with no client
secret (public clients, PKCE); a registration that names no token endpoint method is registered as a public
client (RFC 7591 lets the server replace what a client asked for), one that asks for a secret is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.routes import build_metadata, cors_middleware, create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from mcp.shared.auth import OAuthMetadata
from pydantic import AnyHttpUrl
from starlette.datastructures import Headers
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from engram_memory.contract.tools import ALL_TOOLS
from engram_memory.host.language.catalogue import _, speak
from engram_memory.host.language.choice import from_accept_language
from engram_memory.host.oauth.client_documents import is_document_id
from engram_memory.host.oauth.pages import SignInPages, message_page
from engram_memory.host.oauth.provider import HostAuthorizationProvider
from engram_memory.host.oauth.service import SignInService
from engram_memory.mcp.asgi_bodies import read_body, replayed

METADATA_PATH = "/.well-known/oauth-authorization-server"
REGISTRATION_PATH = "/register"
REVOCATION_PATH = "/revoke"
AUTHORIZE_PATH = "/authorize"
MAX_REGISTRATION_BYTES = 64 * 1024
SCOPES = tuple(tool.value for tool in ALL_TOOLS)


class RewrittenBody:
    """Hands the SDK's handler a POST body `rewrite` changed first (bodies here are small forms and JSON)."""

    def __init__(self, app: ASGIApp, rewrite: Callable[[bytes], bytes]) -> None:
        self.app = app
        self._rewrite = rewrite

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        body, more = await read_body(receive, MAX_REGISTRATION_BYTES)
        # An oversized body goes on unchanged, for the SDK's handler to refuse.
        await self.app(scope, replayed(body if more else self._rewrite(body), more, receive), send)


def _with_empty_secret(body: bytes) -> bytes:
    """A public client's revocation request carries no `client_secret`, which the SDK's request model (2.3)
    requires anyway: an empty one is added to a form that lacks it (the authenticator then checks none)."""
    if b"client_secret=" in body or len(body) > MAX_REGISTRATION_BYTES:
        return body
    return body + (b"&client_secret=" if body else b"client_secret=")


class ReadableDocument:
    """Before the SDK's authorize handler: a client named by a metadata document this server cannot use gets a
    page saying why and what to do, where the SDK would answer a bare "Client ID not found" (its provider
    interface carries no reason)."""

    def __init__(self, app: ASGIApp, provider: HostAuthorizationProvider) -> None:
        self.app = app
        self._provider = provider

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("method") == "GET":
            client_id = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("client_id", [""])[0]
            if is_document_id(client_id) and not await self._provider.revoked(client_id):
                refusal = await self._provider.document_refusal(client_id)
                if refusal is not None:
                    speak(from_accept_language(Headers(scope=scope).get("accept-language")))
                    page = message_page(_("Cannot sign in to this app"), _document_advice(client_id, refusal), 400)
                    await page(scope, receive, send)
                    return
        await self.app(scope, receive, send)


def _document_advice(client_id: str, refusal: str) -> str:
    return _(
        "This app names itself by its metadata document, {client_id}, and {refusal}. If this server cannot "
        'reach it, ask the server\'s administrator to register the app for you (see "Connect a team" in the '
        "README), then give the app that client id: for Claude Code, claude mcp add --transport http "
        "--client-id ID --callback-port PORT."
    ).format(client_id=client_id, refusal=refusal)


def _public_unless_asked(body: bytes) -> bytes:
    """Registers a client that names no token endpoint method as a public one (`none`), before the SDK's
    handler would default it to a client secret this server does not keep."""
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
    registration = ClientRegistrationOptions(enabled=True, valid_scopes=list(SCOPES), default_scopes=list(SCOPES))
    revocation = RevocationOptions(enabled=True)
    metadata = build_metadata(issuer, None, registration, revocation)
    metadata.scopes_supported = list(SCOPES)
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
            public = RewrittenBody(sdk_route.app, _public_unless_asked)
            routes.append(Route(REGISTRATION_PATH, endpoint=public, methods=["POST", "OPTIONS"]))
        elif sdk_route.path == AUTHORIZE_PATH:
            routes.append(
                Route(AUTHORIZE_PATH, endpoint=ReadableDocument(sdk_route.app, provider), methods=["GET", "POST"])
            )
        elif sdk_route.path == REVOCATION_PATH:
            routes.append(
                Route(
                    REVOCATION_PATH,
                    endpoint=RewrittenBody(sdk_route.app, _with_empty_secret),
                    methods=["POST", "OPTIONS"],
                )
            )
        else:
            routes.append(sdk_route)
    return [*routes, *SignInPages(service, secure_cookie=secure_cookie).routes()]
