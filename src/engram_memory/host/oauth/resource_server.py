"""Resource-server mode: access tokens from the team's own authorization server, mapped by the same rules.

`serve --http --public-url URL --trust-issuer ISSUER` accepts JWT access tokens that ISSUER signed (its
keys from its JWKS, found through its metadata, cached and fetched again for a key id not seen yet, by
PyJWT's client), whose audience is this endpoint's URL, unexpired. The token's claims make an identity
(`iss`, `sub`, `email`, `email_verified` — an issuer the host chose to trust vouches for the email unless
the claim says otherwise — and `groups` or `roles`), and access.toml decides the binding exactly as for a
person who signs in here: tenant, the rule's first workspace, tools (narrowed by the token's `scope`
when it names tools), purpose, lifetime up to the token's own expiry. A person no rule admits gets 401.
"""

from __future__ import annotations

import hashlib
import json
import logging
import ssl
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jwt

from engram_memory.contract.binding import Binding
from engram_memory.contract.tools import ALL_TOOLS
from engram_memory.host.access.rules import AccessRules, Identity
from engram_memory.host.access.rules_file import AccessRulesError
from engram_memory.host.outbound import https_or_loopback

logger = logging.getLogger(__name__)

ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
METADATA_PATHS = ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server")
MAX_METADATA_BYTES = 256 * 1024
LEEWAY_S = 30
# A token with a key id not seen yet makes the JWKS be fetched again, at most this often (a flood of made-up
# key ids must not become a flood of fetches): a rotated key is accepted within this long of its first use.
KEY_REFRESH_COOLDOWN_S = 30.0
MAX_REMEMBERED = 4096  # tokens whose verdict (and the tools their person could have) is kept


class TrustError(Exception):
    """The issuer cannot be trusted as configured; the message is one line for the operator."""


@dataclass(frozen=True, slots=True)
class TrustedIssuer:
    issuer: str
    jwks_uri: str
    audience: str  # this endpoint's URL


def _checked_url(url: str, what: str) -> str:
    if not https_or_loopback(url):
        raise TrustError(f"{what} must be https:// (http:// only on a loopback address)")
    return url


def discover(issuer: str, audience: str, *, context: ssl.SSLContext | None = None) -> TrustedIssuer:
    """The issuer's JWKS address, from its OpenID Connect or OAuth metadata (RFC 8414). Raises TrustError."""
    issuer = _checked_url(issuer.rstrip("/"), "--trust-issuer")
    for path in METADATA_PATHS:
        try:
            with urllib.request.urlopen(issuer + path, timeout=10, context=context) as answer:  # noqa: S310 - checked
                body = answer.read(MAX_METADATA_BYTES + 1)
        except (OSError, ValueError):
            continue
        try:
            metadata = json.loads(body)
        except (ValueError, RecursionError):
            continue
        if not isinstance(metadata, dict) or str(metadata.get("issuer", "")).rstrip("/") != issuer:
            continue
        jwks_uri = metadata.get("jwks_uri")
        if isinstance(jwks_uri, str):
            return TrustedIssuer(issuer, _checked_url(jwks_uri, "the issuer's jwks_uri"), audience)
    raise TrustError(f"{issuer} publishes no metadata naming itself and a jwks_uri")


class ExternalTokens:
    """Turns a JWT the trusted issuer signed into the binding the rules give its person, or None."""

    def __init__(
        self,
        trusted: TrustedIssuer,
        rules: Callable[[], AccessRules],
        *,
        context: ssl.SSLContext | None = None,
        cooldown_s: float = KEY_REFRESH_COOLDOWN_S,
    ) -> None:
        self.trusted = trusted
        self._rules = rules
        self._could: dict[str, frozenset[str]] = {}  # token id -> the tools the rules give its person
        self._could_lock = threading.Lock()
        self._keys = jwt.PyJWKClient(
            trusted.jwks_uri,
            cache_keys=True,
            lifespan=300,
            timeout=10,
            ssl_context=context,
            cooldown_duration=cooldown_s,
        )

    def binding(self, token: str) -> Binding | None:
        try:
            key = self._keys.get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=ALGORITHMS,
                audience=self.trusted.audience,
                issuer=self.trusted.issuer,
                leeway=LEEWAY_S,
                options={"require": ["iss", "aud", "sub", "exp"]},
            )
        except (jwt.PyJWTError, ValueError):
            return None
        identity = _identity(claims)
        try:
            decision = self._rules().decide(identity)
        except AccessRulesError:
            logger.warning("access.toml cannot be read: tokens of %s are refused", self.trusted.issuer)
            return None
        access = decision.access
        if access is None:
            return None
        asked = _scopes(claims)
        tools = access.grants & asked if asked else access.grants
        expires = int(claims["exp"])
        iat = claims.get("iat")
        issued_at = iat if isinstance(iat, int) and not isinstance(iat, bool) else expires - 1
        expires_at_ms = min(expires, issued_at + access.access_lifetime_s) * 1000
        token_id = "ext_" + hashlib.sha256(token.encode("utf-8")).hexdigest()[:24]
        with self._could_lock:
            self._could[token_id] = frozenset(access.grants)
            while len(self._could) > MAX_REMEMBERED:
                del self._could[next(iter(self._could))]
        return Binding(
            token_id=token_id,
            tenant=access.tenant,
            workspace=access.workspaces[0],
            principal=identity.principal,
            agent_id=_text(claims.get("azp") or claims.get("client_id")) or "external-client",
            session=_text(claims.get("sid") or claims.get("jti")) or "external-session",
            purpose_ref=access.purpose,
            grants=frozenset(tools),
            confirm_mutations=access.confirm_mutations,
            issued_at_ms=issued_at * 1000,
            expires_at_ms=expires_at_ms,
            trust_class=access.trust_class,
            resource=self.trusted.audience,
        )

    def could_have(self, binding: Binding) -> frozenset[str]:
        """The tools the rules gave the token's person, before its scope narrowed them (scope step-up)."""
        with self._could_lock:
            return self._could.get(binding.token_id, frozenset())


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value and value.isprintable() and len(value) <= 256 else None


def _identity(claims: dict[str, Any]) -> Identity:
    groups = claims.get("groups", claims.get("roles", []))
    verified = claims.get("email_verified", True)
    return Identity(
        issuer=str(claims["iss"]).rstrip("/"),
        subject=str(claims["sub"]),
        email=_text(claims.get("email")),
        email_verified=verified is True or verified == "true",
        groups=frozenset(group for group in groups if isinstance(group, str))
        if isinstance(groups, list)
        else frozenset(),
    )


_TOOLS = frozenset(tool.value for tool in ALL_TOOLS)


def _scopes(claims: dict[str, Any]) -> set[str]:
    """The tools the token's scope names (`scope` or `scp`); none named: no narrowing."""
    scope = claims.get("scope", claims.get("scp", ""))
    words = (
        scope.split()
        if isinstance(scope, str)
        else [s for s in scope if isinstance(s, str)]
        if isinstance(scope, list)
        else []
    )
    return {word for word in words if word in _TOOLS}
