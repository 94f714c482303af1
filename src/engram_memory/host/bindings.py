"""Host-signed binding tokens (EdDSA JWTs): the only way tenant, workspace and identity reach a call.

`bind` signs one; `serve` verifies it. A token whose signature verifies but whose time is up still
yields a binding (calls then answer AUTHORIZATION_EXPIRED); anything that does not verify yields none.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from engram_memory.contract.binding import TRUST_CLASSES, Binding
from engram_memory.contract.ids import new_token_id
from engram_memory.contract.tools import Tool
from engram_memory.engine.ports.rows import IssuedBindingRow
from engram_memory.host.keys.files import key_id
from engram_memory.host.language.catalogue import _

ISSUER = "engram-memory/host"
AUDIENCE = "engram-memory/mcp"
CLAIMS_KEY = "engram"
MAX_LIFETIME_S = 366 * 86_400
# `issued_by` of the access tokens sign-in issues: one per refresh of a grant, listed as the grant's newest.
SIGNED_IN = "sign-in"
# What `bind` prints as a token id (contract/ids.new_token_id), for commands that take one back.
TOKEN_ID_RE = re.compile(r"^bind_[a-z2-7]{16}$")
_DURATION = re.compile(r"^([1-9][0-9]{0,8})([smhd]?)$")
_UNITS = MappingProxyType({"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400})


class BindingError(Exception):
    """A binding that cannot be issued or does not verify; the message is a one-line reason."""


def parse_duration(text: str) -> int:
    """Seconds in '90', '90s', '30m', '8h' or '7d'. Raises BindingError."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise BindingError(_("a duration looks like 90s, 30m, 8h or 7d"))
    seconds = int(match.group(1)) * _UNITS[match.group(2)]
    if seconds > MAX_LIFETIME_S:
        raise BindingError(_("a binding lives at most 366 days"))
    return seconds


def _check_ref(name: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise BindingError(_("{name} must be a non-empty string").format(name=name))
    if not unicodedata.is_normalized("NFC", value) or len(value.encode("utf-8", "surrogatepass")) > 512:
        raise BindingError(_("{name} must be NFC text of at most 512 bytes").format(name=name))
    if any(unicodedata.category(char).startswith("C") for char in value):
        raise BindingError(_("{name} must not contain control characters").format(name=name))
    return value


@dataclass(frozen=True, slots=True)
class IssuedBinding:
    token: str
    binding: Binding


def issue_binding(
    signing_key: Ed25519PrivateKey,
    *,
    tenant: str,
    workspace: str,
    principal: str,
    agent_id: str,
    session: str,
    purpose_ref: str,
    grants: frozenset[str],
    confirm_mutations: bool,
    lifetime_s: int,
    now_s: int,
    trust_class: str = "asserted",
    resource: str | None = None,
) -> IssuedBinding:
    """Raises BindingError for any value that could not be verified back into the same binding.

    `resource`: the MCP endpoint an OAuth access token is for (RFC 8707), added to its audience."""
    fields = {
        "tenant": tenant,
        "workspace": workspace,
        "principal": principal,
        "agent_id": agent_id,
        "session": session,
        "purpose_ref": purpose_ref,
    }
    for name, value in fields.items():
        _check_ref(name, value)
    known = {tool.value for tool in Tool}
    if not grants <= known:
        raise BindingError(_("a grant names a tool that does not exist"))
    if trust_class not in TRUST_CLASSES:
        raise BindingError(_("the trust class must be asserted, earned or signed"))
    if not 0 < lifetime_s <= MAX_LIFETIME_S:
        raise BindingError(_("a binding lives between 1 second and 366 days"))
    token_id = new_token_id()
    if resource is not None and (not resource.startswith(("https://", "http://")) or resource == AUDIENCE):
        raise BindingError(_("a token's resource is the URL of an MCP endpoint"))
    claims: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE if resource is None else [AUDIENCE, resource],
        "sub": principal,
        "jti": token_id,
        "iat": now_s,
        "exp": now_s + lifetime_s,
        CLAIMS_KEY: {
            **fields,
            "grants": sorted(grants),
            "confirm_mutations": confirm_mutations,
            "trust_class": trust_class,
        },
    }
    token = jwt.encode(claims, signing_key, algorithm="EdDSA", headers={"kid": key_id(signing_key.public_key())})
    return IssuedBinding(token=token, binding=_binding(claims))


# A binding is due for renewal (and `bindings list` marks it expiring) once less than a fifth of its
# lifetime, and less than a day, is left.
RENEWAL_SHARE = 5
RENEWAL_AT_MOST_MS = 86_400_000


def renewal_due(issued_at_ms: int, expires_at_ms: int, now_ms: int) -> bool:
    lifetime_ms = expires_at_ms - issued_at_ms
    return expires_at_ms - now_ms < min(RENEWAL_AT_MOST_MS, lifetime_ms // RENEWAL_SHARE)


def renewed(signing_key: Ed25519PrivateKey, binding: Binding, *, now_s: int) -> IssuedBinding:
    """The same claims under a new token id, for as long again as `binding` was issued for."""
    return issue_binding(
        signing_key,
        tenant=binding.tenant,
        workspace=binding.workspace,
        principal=binding.principal,
        agent_id=binding.agent_id,
        session=binding.session,
        purpose_ref=binding.purpose_ref,
        grants=binding.grants,
        confirm_mutations=binding.confirm_mutations,
        lifetime_s=max(1, (binding.expires_at_ms - binding.issued_at_ms) // 1000),
        now_s=now_s,
        trust_class=binding.trust_class,
        resource=binding.resource,
    )


def _binding(claims: dict[str, Any]) -> Binding:
    body = claims[CLAIMS_KEY]
    grants = body["grants"]
    if not isinstance(grants, list) or not all(isinstance(g, str) for g in grants):
        raise BindingError(_("the binding's grants are malformed"))
    if not {g for g in grants} <= {tool.value for tool in Tool}:
        raise BindingError(_("the binding grants an unknown tool"))
    if not isinstance(body["confirm_mutations"], bool):
        raise BindingError(_("the binding's confirmation switch is malformed"))
    trust_class = body.get("trust_class", "asserted")
    if trust_class not in TRUST_CLASSES:
        raise BindingError(_("the binding's trust class is unknown"))
    for name in ("iat", "exp"):
        if isinstance(claims[name], bool) or not isinstance(claims[name], int):
            raise BindingError(_("the binding's times are malformed"))
    if body["principal"] != claims["sub"]:
        raise BindingError(_("the binding's principal does not match its subject"))
    audience = claims["aud"]
    others = [] if isinstance(audience, str) else [entry for entry in audience if entry != AUDIENCE]
    if len(others) > 1 or not all(isinstance(entry, str) for entry in others):
        raise BindingError(_("the binding's audience is malformed"))
    return Binding(
        resource=others[0] if others else None,
        token_id=_check_ref("jti", claims["jti"]),
        tenant=_check_ref("tenant", body["tenant"]),
        workspace=_check_ref("workspace", body["workspace"]),
        principal=_check_ref("principal", body["principal"]),
        agent_id=_check_ref("agent_id", body["agent_id"]),
        session=_check_ref("session", body["session"]),
        purpose_ref=_check_ref("purpose_ref", body["purpose_ref"]),
        grants=frozenset(grants),
        confirm_mutations=body["confirm_mutations"],
        issued_at_ms=claims["iat"] * 1000,
        expires_at_ms=claims["exp"] * 1000,
        trust_class=trust_class,
    )


def verify_binding(public_key: Ed25519PublicKey, token: str) -> Binding:
    """The binding a host-signed token carries, expired or not. Raises BindingError when it does not verify."""
    try:
        claims = jwt.decode(
            token,
            public_key,
            algorithms=["EdDSA"],
            audience=AUDIENCE,
            issuer=ISSUER,
            options={
                "verify_exp": False,
                "verify_iat": False,
                "require": ["iss", "aud", "sub", "jti", "iat", "exp"],
            },
        )
    except jwt.PyJWTError as exc:
        raise BindingError(_("the binding token does not verify against this host's key")) from exc
    try:
        return _binding(claims)
    except (KeyError, TypeError) as exc:
        raise BindingError(_("the binding token's claims are malformed")) from exc


def issued_row_of(binding: Binding, *, issued_by: str) -> IssuedBindingRow:
    """What the home keeps of a binding it signed: the claims, never the token."""
    return IssuedBindingRow(
        token_id=binding.token_id,
        tenant=binding.tenant,
        workspace=binding.workspace,
        principal=binding.principal,
        agent_id=binding.agent_id,
        session=binding.session,
        purpose_ref=binding.purpose_ref,
        grants=tuple(sorted(binding.grants)),
        confirm_mutations=binding.confirm_mutations,
        trust_class=binding.trust_class,
        issued_at_ms=binding.issued_at_ms,
        expires_at_ms=binding.expires_at_ms,
        issued_by=issued_by,
    )
