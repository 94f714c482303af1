"""An authorization request between `/authorize` and the person's consent, carried by the browser, signed.

The SDK's handler has checked the client, its redirect URI and the PKCE challenge; what it hands on must
survive the person's sign-in without the server keeping anything (any server of the home may answer the
next page). So it travels as a short-lived EdDSA JWT signed with the host's key (PyJWT), readable by no
other audience than these pages, and the consent form's CSRF token is another, bound to the browser's
session and to this request.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram_memory.host.bindings import ISSUER

REQUEST_AUDIENCE = "engram-memory/sign-in"
CSRF_AUDIENCE = "engram-memory/consent"
REQUEST_LIFETIME_S = 10 * 60


class PendingError(Exception):
    """The request or token does not verify (forged, altered, expired or for another audience)."""


@dataclass(frozen=True, slots=True)
class PendingRequest:
    client_id: str
    redirect_uri: str
    redirect_uri_explicit: bool
    code_challenge: str
    state: str | None
    scopes: tuple[str, ...]
    resource: str


def seal_request(key: Ed25519PrivateKey, request: PendingRequest, *, now_s: int) -> str:
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": REQUEST_AUDIENCE,
        "iat": now_s,
        "exp": now_s + REQUEST_LIFETIME_S,
        "client_id": request.client_id,
        "redirect_uri": request.redirect_uri,
        "explicit": request.redirect_uri_explicit,
        "challenge": request.code_challenge,
        "state": request.state,
        "scopes": list(request.scopes),
        "resource": request.resource,
    }
    return jwt.encode(claims, key, algorithm="EdDSA")


def open_request(key: Ed25519PrivateKey, sealed: str, *, now_s: int) -> PendingRequest:
    claims = _decode(key, sealed, REQUEST_AUDIENCE, now_s)
    try:
        return PendingRequest(
            client_id=str(claims["client_id"]),
            redirect_uri=str(claims["redirect_uri"]),
            redirect_uri_explicit=bool(claims["explicit"]),
            code_challenge=str(claims["challenge"]),
            state=None if claims["state"] is None else str(claims["state"]),
            scopes=tuple(str(scope) for scope in claims["scopes"]),
            resource=str(claims["resource"]),
        )
    except (KeyError, TypeError) as exc:
        raise PendingError("the request is malformed") from exc


def csrf_token(key: Ed25519PrivateKey, session_digest: str, sealed_request: str, *, now_s: int) -> str:
    """A token the consent form carries: good only with this browser session and this request."""
    claims = {
        "iss": ISSUER,
        "aud": CSRF_AUDIENCE,
        "iat": now_s,
        "exp": now_s + REQUEST_LIFETIME_S,
        "session": session_digest,
        "request": hashlib.sha256(sealed_request.encode("utf-8")).hexdigest(),
    }
    return jwt.encode(claims, key, algorithm="EdDSA")


def check_csrf(key: Ed25519PrivateKey, token: str, session_digest: str, sealed_request: str, *, now_s: int) -> None:
    claims = _decode(key, token, CSRF_AUDIENCE, now_s)
    expected = hashlib.sha256(sealed_request.encode("utf-8")).hexdigest()
    if claims.get("session") != session_digest or claims.get("request") != expected:
        raise PendingError("the form does not belong to this session and request")


def _decode(key: Ed25519PrivateKey, token: str, audience: str, now_s: int) -> dict[str, Any]:
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key.public_key(),
            algorithms=["EdDSA"],
            audience=audience,
            issuer=ISSUER,
            options={"require": ["iss", "aud", "iat", "exp"], "verify_exp": False},
        )
    except jwt.PyJWTError as exc:
        raise PendingError("the request does not verify") from exc
    if not isinstance(claims.get("exp"), int) or claims["exp"] <= now_s:
        raise PendingError("the request has expired: start again from the application")
    return claims
