"""`serve --http --public-url URL`: this host as the authorization server of its own MCP endpoint.

Needs the home's access rules (access.toml, read again at every sign-in and refresh, so an edit takes
effect without a restart) and its vault (people, clients, grants); tokens are signed with the home's key.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

from engram_memory.engine.engine import Engine
from engram_memory.host.access.ending import revoking_as
from engram_memory.host.access.rules import AccessRules
from engram_memory.host.access.rules_file import AccessRulesError, read_access_rules
from engram_memory.host.compose import open_vault
from engram_memory.host.keys.files import load_signing_key, upstream_token_key
from engram_memory.host.language.catalogue import _
from engram_memory.host.oauth.resource_server import MAX_REMEMBERED, ExternalTokens, TrustError, discover
from engram_memory.host.oauth.routes import authorization_routes
from engram_memory.host.oauth.sealed_tokens import TokenSeal
from engram_memory.host.oauth.service import ISSUED_BY, SignInService, SignInSettings
from engram_memory.host.outbound import https_or_loopback, on_loopback, tls_context
from engram_memory.host.serve.http import SignIn
from engram_memory.host.settings import HostPaths
from engram_memory.mcp.http import MCP_PATH, Authorization


class SignInSetupError(Exception):
    """Sign-in cannot be served as asked; the message is one line for the operator."""


def public_url_of(text: str) -> str:
    """The issuer: https://host[:port] (http only on a loopback host), no path, query or fragment."""
    parts = urlsplit(text.strip())
    if not https_or_loopback(text.strip()):
        raise SignInSetupError(_("--public-url must be https:// (http:// only for a loopback address)"))
    if not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise SignInSetupError(_("--public-url is the server's origin only, e.g. https://memory.example.com"))
    return f"{parts.scheme}://{parts.netloc}"


@contextmanager
def sign_in_for(paths: HostPaths, public_url: str, owner: Engine) -> Iterator[SignIn]:
    issuer = public_url_of(public_url)
    rules = _rules_of(paths)
    vault = open_vault(paths)
    try:
        service = SignInService(
            vault.sign_in(),
            load_signing_key(paths),
            SignInSettings(issuer=issuer, resource=issuer + MCP_PATH),
            rules,
            owner.record_binding,
            revoking_as(owner, ISSUED_BY),
            lambda: int(time.time() * 1000),
            TokenSeal(upstream_token_key(paths)),
        )
        authorization = Authorization(
            issuer=issuer, resource=issuer + MCP_PATH, revoked=owner.is_revoked, could_have=service.could_have
        )
        secure = issuer.startswith("https://")
        routes = authorization_routes(service, secure_cookie=secure, loopback=on_loopback(issuer))
        yield SignIn(routes=routes, authorization=authorization)
    finally:
        vault.close()


def _rules_of(paths: HostPaths) -> Callable[[], AccessRules]:
    """The home's access rules, read again at each call (an edit takes effect without a restart); the file
    must exist and read now, or the server does not start."""
    try:
        if read_access_rules(paths.access) is None:
            raise SignInSetupError(
                _("sign-in needs access rules: {access} does not exist (engram-memory access example)").format(
                    access=paths.access
                )
            )
    except AccessRulesError as exc:
        raise SignInSetupError(str(exc)) from exc

    def rules() -> AccessRules:
        return read_access_rules(paths.access) or AccessRules(rules=())

    return rules


@contextmanager
def trusting(paths: HostPaths, public_url: str, issuer: str, owner: Engine) -> Iterator[SignIn]:
    """Resource-server mode: tokens from `issuer` (the team's authorization server), mapped by access.toml;
    this server runs no sign-in pages of its own."""
    origin = public_url_of(public_url)
    rules = _rules_of(paths)
    context = tls_context()
    try:
        trusted = discover(issuer, origin + MCP_PATH, context=context)
    except TrustError as exc:
        raise SignInSetupError(str(exc)) from exc
    tokens = ExternalTokens(trusted, rules, context=context)
    verdicts = functools.lru_cache(maxsize=MAX_REMEMBERED)(tokens.binding)
    authorization = Authorization(
        issuer=trusted.issuer,
        resource=trusted.audience,
        revoked=owner.is_revoked,
        external=verdicts,
        could_have=tokens.could_have,
    )
    yield SignIn(routes=(), authorization=authorization)
