"""The SDK's authorization-server provider, answered by this host's sign-in service.

The SDK's handlers check what OAuth itself requires (PKCE S256, the redirect URI, the code's client and
expiry, client authentication); this class supplies what only the host knows: its clients, where a person
signs in, and what a grant's tokens carry. Presenting a code or a refresh token spends it (a second
presentation revokes the grant), so a code that fails the SDK's later checks is spent too.
"""

from __future__ import annotations

import logging
from urllib.parse import urlencode

import anyio
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    RegistrationError,
    TokenError,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import ValidationError

from engram_memory.engine.ports.sign_in import ClientRow
from engram_memory.host.bindings import BindingError, verify_binding
from engram_memory.host.oauth.client_documents import DocumentCache, DocumentRefused, fetch_document, is_document_id
from engram_memory.host.oauth.pending import PendingRequest, seal_request
from engram_memory.host.oauth.service import GrantRefused, SignInService

logger = logging.getLogger(__name__)

SIGN_IN_PATH = "/sign-in"


class HostAuthorizationProvider:
    def __init__(self, service: SignInService, *, loopback_documents: bool = False) -> None:
        self.service = service
        self._documents = DocumentCache()
        self._loopback_documents = loopback_documents

    # -- clients -----------------------------------------------------------------------------------
    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if is_document_id(client_id):
            return await self._document_client(client_id)
        row = await anyio.to_thread.run_sync(self.service.store.client, client_id)
        if row is None or row.revoked_at_ms is not None:
            return None
        try:
            return OAuthClientInformationFull.model_validate_json(row.metadata)
        except ValidationError:
            return None

    async def _document_client(self, client_id: str) -> OAuthClientInformationFull | None:
        """A client known by its metadata document: fetched (kept ten minutes), never registered; one the host
        revoked is turned away whatever its document says."""
        if await self.revoked(client_id):
            return None
        known = self._documents.get(client_id)
        if known is None and await self.document_refusal(client_id) is None:
            known = self._documents.get(client_id)
        return known

    async def revoked(self, client_id: str) -> bool:
        row = await anyio.to_thread.run_sync(self.service.store.client, client_id)
        return row is not None and row.revoked_at_ms is not None

    async def document_refusal(self, client_id: str) -> str | None:
        """Why the client's metadata document cannot be used (one sentence for the person), or None once it
        is fetched, checked and cached."""
        if self._documents.get(client_id) is not None:
            return None
        try:
            client = await fetch_document(client_id, allow_loopback=self._loopback_documents)
        except DocumentRefused as refused:
            logger.info("client %s refused: %s", client_id, refused)
            return str(refused)
        self._documents.put(client)
        row = ClientRow(client_id, client.model_dump_json(exclude_none=True), None, "document", self.service.now_ms())
        await anyio.to_thread.run_sync(self.service.store.put_client, row)
        return None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        public = client_info.token_endpoint_auth_method == "none"  # noqa: S105 - a method's name, not a password
        if not public or client_info.client_secret is not None:
            raise RegistrationError(
                "invalid_client_metadata",
                "this server registers public clients only: token_endpoint_auth_method none, with PKCE",
            )
        row = ClientRow(
            client_id=str(client_info.client_id),
            metadata=client_info.model_dump_json(exclude_none=True),
            secret_digest=None,
            source="registered",
            registered_at_ms=self.service.now_ms(),
        )
        await anyio.to_thread.run_sync(self.service.store.put_client, row)

    # -- authorization -----------------------------------------------------------------------------
    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        resource = params.resource or self.service.settings.resource
        if resource.rstrip("/") != self.service.settings.resource.rstrip("/"):
            raise AuthorizeError("invalid_target", "this server issues tokens for its own MCP endpoint only")
        request = PendingRequest(
            client_id=str(client.client_id),
            redirect_uri=str(params.redirect_uri),
            redirect_uri_explicit=params.redirect_uri_provided_explicitly,
            code_challenge=params.code_challenge,
            state=params.state,
            scopes=tuple(params.scopes or ()),
            resource=self.service.settings.resource,
        )
        sealed = seal_request(self.service.key, request, now_s=self.service.now_ms() // 1000)
        return f"{self.service.settings.issuer}{SIGN_IN_PATH}?{urlencode({'request': sealed})}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        spent = await anyio.to_thread.run_sync(self.service.spend_code, authorization_code)
        if spent is None:
            return None
        row, grant = spent
        return AuthorizationCode(  # its subject is the grant it was issued for
            code=authorization_code,
            scopes=list(grant.scopes),
            expires_at=row.expires_at_ms / 1000,
            client_id=grant.client_id,
            code_challenge=row.code_challenge,
            redirect_uri=row.redirect_uri,  # type: ignore[arg-type]
            redirect_uri_provided_explicitly=row.redirect_uri_explicit,
            resource=grant.resource,
            subject=grant.grant_id,
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        grant_id = authorization_code.subject or ""
        return await self._tokens(grant_id, None)

    # -- refresh -----------------------------------------------------------------------------------
    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> RefreshToken | None:
        usable = await anyio.to_thread.run_sync(self.service.usable_refresh, refresh_token)
        if usable is None:
            return None
        row, grant = usable
        return RefreshToken(
            token=refresh_token,
            client_id=grant.client_id,
            scopes=list(grant.scopes),
            expires_at=row.expires_at_ms // 1000,
            resource=grant.resource,
            subject=grant.grant_id,
        )

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        return await self._tokens(refresh_token.subject or "", tuple(scopes), refresh_token=refresh_token.token)

    async def _tokens(
        self, grant_id: str, scopes: tuple[str, ...] | None, *, refresh_token: str | None = None
    ) -> OAuthToken:
        """At a refresh, a person who signed in through the team's provider is asked about there first, and
        only then is the refresh token spent: a provider out of reach for a moment costs the client nothing."""
        grant = await anyio.to_thread.run_sync(self.service.store.grant, grant_id)
        if grant is None or grant.revoked_at_ms is not None:
            raise TokenError("invalid_grant", "the grant was revoked: sign in again")
        try:
            identity = None
            if refresh_token is not None:
                identity = await self.service.asked_upstream(grant)
                if await anyio.to_thread.run_sync(self.service.spend_refresh, refresh_token) is None:
                    raise GrantRefused("the refresh token was used already: its grant is revoked")
            tokens = await anyio.to_thread.run_sync(self.service.tokens, grant, scopes, identity)
        except GrantRefused as refused:
            raise TokenError("invalid_grant", str(refused)) from None
        return OAuthToken(
            access_token=tokens.access_token,
            token_type="Bearer",  # noqa: S106 - the token type, not a password
            expires_in=tokens.expires_in_s,
            scope=" ".join(tokens.scopes) or None,
            refresh_token=tokens.refresh_token,
        )

    # -- access tokens and revocation ---------------------------------------------------------------
    async def load_access_token(self, token: str) -> AccessToken | None:
        """An access token this server issued (for revocation: requests are verified by the bearer hook)."""
        try:
            binding = verify_binding(self.service.key.public_key(), token.strip())
        except BindingError:
            return None
        if binding.resource is None:
            return None
        return AccessToken(
            token=token,
            client_id=binding.agent_id,
            scopes=sorted(binding.grants),
            expires_at=binding.expires_at_ms // 1000,
            resource=binding.resource,
            subject=binding.session,
        )

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        if token.subject:
            await anyio.to_thread.run_sync(self.service.revoke, token.subject, "the client revoked its token")

    async def exchange_identity_assertion(self, client: OAuthClientInformationFull, params: object) -> OAuthToken:
        raise TokenError("unsupported_grant_type", "this server does not accept identity assertions")
