"""Signing a person in through the team's OpenID Connect provider (`[identity_provider]` in access.toml).

Authorization code flow with PKCE (S256), `state` and `nonce` (Authlib's client); the ID token's signature
(the provider's JWKS, PyJWT), issuer, audience, expiry and nonce are checked before its claims become the
identity the access rules read: issuer, `sub`, `email` (verified only if `email_verified` says so) and the
configured groups claim. What must survive the round trip through the provider (state, nonce, PKCE
verifier, the pending authorization request) travels in a short-lived cookie signed with the host's key,
so any server of the home can take the callback.

When the provider also issues a refresh token (scope `offline_access` on most providers), the grant keeps
it, sealed, and each refresh of the grant first refreshes at the provider: the person as the provider
describes them then (a new ID token, or userinfo) is what the access rules decide on, and a person the
provider no longer signs in (`invalid_grant`) loses the grant.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.httpx_client import AsyncOAuth2Client
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram_memory.host.access.rules import Identity, IdentityProvider
from engram_memory.host.bindings import ISSUER
from engram_memory.host.outbound import tls_context

ROUND_TRIP_AUDIENCE = "engram-memory/upstream"
ROUND_TRIP_S = 600
ID_TOKEN_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")
MAX_METADATA_BYTES = 256 * 1024
CALLBACK_PATH = "/sign-in/callback"
OFFLINE_SCOPE = "offline_access"
# What a token endpoint answers when the refresh token (or the person behind it) is no longer good.
ENDED = frozenset({"invalid_grant", "unauthorized_client", "access_denied", "invalid_client"})


class UpstreamError(Exception):
    """The provider's sign-in failed or could not be trusted; the message is one sentence for the person."""


class UpstreamRefused(UpstreamError):
    """The provider no longer signs this person in through this server (it said so at a refresh)."""


@dataclass(frozen=True, slots=True)
class ProviderSignIn:
    identity: Identity
    request: str  # the pending authorization request, sealed
    refresh_token: str | None  # the provider's, when it issued one


@dataclass(frozen=True, slots=True)
class ProviderEndpoints:
    authorization: str
    token: str
    jwks: str
    userinfo: str | None = None


class Upstream:
    def __init__(self, provider: IdentityProvider, key: Ed25519PrivateKey, callback_url: str) -> None:
        self.provider = provider
        self._key = key
        self._callback = callback_url
        self._endpoints: ProviderEndpoints | None = None
        self._keys: jwt.PyJWKClient | None = None

    async def endpoints(self) -> ProviderEndpoints:
        if self._endpoints is None:
            url = self.provider.issuer + "/.well-known/openid-configuration"
            try:
                async with httpx.AsyncClient(timeout=10, verify=tls_context()) as client:
                    answer = await client.get(url)
                metadata: Any = answer.json() if len(answer.content) <= MAX_METADATA_BYTES else None
            except (httpx.HTTPError, ValueError) as exc:
                raise UpstreamError(f"{self.provider.name} cannot be reached: try again later") from exc
            if not isinstance(metadata, dict) or str(metadata.get("issuer", "")).rstrip("/") != self.provider.issuer:
                raise UpstreamError(f"{self.provider.name} does not describe itself as its configured issuer")
            try:
                userinfo = metadata.get("userinfo_endpoint")
                self._endpoints = ProviderEndpoints(
                    str(metadata["authorization_endpoint"]),
                    str(metadata["token_endpoint"]),
                    str(metadata["jwks_uri"]),
                    userinfo if isinstance(userinfo, str) else None,
                )
            except KeyError as exc:
                raise UpstreamError(f"{self.provider.name} publishes incomplete metadata") from exc
        return self._endpoints

    def _client(self) -> AsyncOAuth2Client:
        try:
            secret = Path(self.provider.client_secret_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UpstreamError("this server's sign-in secret cannot be read: ask its administrator") from exc
        return AsyncOAuth2Client(
            client_id=self.provider.client_id,
            client_secret=secret,
            scope=" ".join(self.provider.scopes),
            redirect_uri=self._callback,
            code_challenge_method="S256",
            verify=tls_context(),
            timeout=10,
        )

    async def start(self, sealed_request: str, *, now_s: int) -> tuple[str, str]:
        """(the provider's authorization URL, the round-trip cookie's value)."""
        endpoints = await self.endpoints()
        state, nonce, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(24), secrets.token_urlsafe(48)
        async with self._client() as client:
            # OpenID Connect Core 11: offline access is asked with a consent prompt.
            extra = {"prompt": "consent"} if OFFLINE_SCOPE in self.provider.scopes else {}
            url, _ = client.create_authorization_url(
                endpoints.authorization, state=state, code_verifier=verifier, nonce=nonce, **extra
            )
        claims = {
            "iss": ISSUER,
            "aud": ROUND_TRIP_AUDIENCE,
            "iat": now_s,
            "exp": now_s + ROUND_TRIP_S,
            "state": state,
            "nonce": nonce,
            "verifier": verifier,
            "request": sealed_request,
        }
        return url, jwt.encode(claims, self._key, algorithm="EdDSA")

    async def finish(self, code: str, state: str, cookie: str) -> ProviderSignIn:
        """The person the provider vouches for, and the pending request to go on with."""
        try:
            trip: dict[str, Any] = jwt.decode(
                cookie, self._key.public_key(), algorithms=["EdDSA"], audience=ROUND_TRIP_AUDIENCE, issuer=ISSUER
            )
        except jwt.PyJWTError as exc:
            raise UpstreamError("this sign-in has expired or was not started here: start again") from exc
        if not secrets.compare_digest(str(trip.get("state", "")), state):
            raise UpstreamError("this sign-in was not started in this browser: start again")
        endpoints = await self.endpoints()
        try:
            async with self._client() as client:
                token = await client.fetch_token(endpoints.token, code=code, code_verifier=str(trip["verifier"]))
        except Exception as exc:  # Authlib raises its own errors and httpx's
            raise UpstreamError(f"{self.provider.name} did not complete the sign-in: start again") from exc
        id_token = token.get("id_token") if isinstance(token, dict) else None
        if not isinstance(id_token, str):
            raise UpstreamError(f"{self.provider.name} sent no identity: start again")
        claims = await self._completed(self._verified(id_token, str(trip["nonce"]), endpoints), token, endpoints)
        return ProviderSignIn(self._identity(claims), str(trip["request"]), _refresh_token_of(token))

    async def refresh(self, refresh_token: str, previous: Identity) -> tuple[Identity, str]:
        """The person as the provider describes them now, and the refresh token to keep (rotated or not).
        UpstreamRefused when the provider no longer signs them in; UpstreamError when it cannot be asked."""
        endpoints = await self.endpoints()
        try:
            async with self._client() as client:
                token = await client.refresh_token(endpoints.token, refresh_token=refresh_token)
        except OAuthError as exc:
            if exc.error in ENDED:
                raise UpstreamRefused(f"{self.provider.name} no longer signs in {previous.principal}") from exc
            raise UpstreamError(f"{self.provider.name} refused to refresh ({exc.error})") from exc
        except Exception as exc:  # httpx's errors, or a body that is not a token response
            raise UpstreamError(f"{self.provider.name} cannot be reached") from exc
        id_token = token.get("id_token") if isinstance(token, dict) else None
        claims: dict[str, Any] = {"sub": previous.subject}
        if isinstance(id_token, str):
            claims = self._verified(id_token, None, endpoints)
        elif endpoints.userinfo is None:
            raise UpstreamError(f"{self.provider.name} says nothing about {previous.principal} at a refresh")
        if claims.get("sub") != previous.subject:
            raise UpstreamRefused(f"{self.provider.name} answered for another person")
        claims = await self._completed(claims, token, endpoints, refreshing=True)
        return self._identity(claims), _refresh_token_of(token) or refresh_token

    async def _completed(
        self, claims: dict[str, Any], token: Any, endpoints: ProviderEndpoints, *, refreshing: bool = False
    ) -> dict[str, Any]:
        """The ID token's claims, with what it left out read from userinfo. At a refresh userinfo must
        answer: a person described without their groups for a moment must not lose their grant."""
        if endpoints.userinfo is None or ("email" in claims and self.provider.groups_claim in claims):
            return claims
        access_token = str(token.get("access_token", "")) if isinstance(token, dict) else ""
        info = await self._userinfo(endpoints.userinfo, access_token, claims)
        if refreshing and not info:
            raise UpstreamError(f"{self.provider.name}'s userinfo did not answer")
        return {**info, **claims}

    async def _userinfo(self, url: str, access_token: str, claims: dict[str, Any]) -> dict[str, Any]:
        """The provider's userinfo (OIDC Core 5.3), for claims it keeps out of the ID token; only when it is
        about the same subject; empty when it does not answer."""
        try:
            async with httpx.AsyncClient(timeout=10, verify=tls_context()) as client:
                answer = await client.get(url, headers={"authorization": f"Bearer {access_token}"})
            info: Any = answer.json() if answer.status_code == 200 else {}
        except (httpx.HTTPError, ValueError):
            info = {}
        return info if isinstance(info, dict) and info.get("sub") == claims.get("sub") else {}

    def _verified(self, id_token: str, nonce: str | None, endpoints: ProviderEndpoints) -> dict[str, Any]:
        """The ID token's claims once its signature, issuer, audience and expiry hold, and the nonce of the
        sign-in it answers (a refresh's ID token need carry none: OpenID Connect Core 12.2)."""
        if self._keys is None:
            self._keys = jwt.PyJWKClient(endpoints.jwks, cache_keys=True, timeout=10, ssl_context=tls_context())
        try:
            key = self._keys.get_signing_key_from_jwt(id_token)
            claims: dict[str, Any] = jwt.decode(
                id_token,
                key.key,
                algorithms=ID_TOKEN_ALGORITHMS,
                audience=self.provider.client_id,
                issuer=self.provider.issuer,
                leeway=30,
                options={"require": ["iss", "aud", "sub", "exp", *(["nonce"] if nonce is not None else [])]},
            )
        except (jwt.PyJWTError, ValueError) as exc:
            raise UpstreamError(f"{self.provider.name}'s answer does not verify: start again") from exc
        if nonce is not None and not secrets.compare_digest(str(claims.get("nonce", "")), nonce):
            raise UpstreamError(f"{self.provider.name}'s answer is not for this sign-in: start again")
        return claims

    def _identity(self, claims: dict[str, Any]) -> Identity:
        groups = claims.get(self.provider.groups_claim, [])
        email = claims.get("email")
        return Identity(
            issuer=self.provider.issuer,
            subject=str(claims["sub"]),
            email=email if isinstance(email, str) and email else None,
            email_verified=claims.get("email_verified") is True,
            groups=frozenset(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else frozenset(),
        )


def _refresh_token_of(token: Any) -> str | None:
    found = token.get("refresh_token") if isinstance(token, dict) else None
    return found if isinstance(found, str) and found else None
