"""The authorization server's decisions, apart from HTTP: who a grant is for, and what its tokens carry.

A grant is one person's consent to one client for one workspace. Its tokens are bindings (the host's
EdDSA JWT with the engram claims, audience the MCP URL) whose tenant, tools, purpose and lifetime the
access rules decide from the person's identity, again at every refresh: a person the rules stop admitting,
or whose account is disabled, loses access at the next refresh, and their grant is revoked. A person who
signed in through the team's provider is asked about there first, when the provider gave a refresh token
(see upstream.py). Refresh tokens rotate; presenting a spent one revokes its whole grant (RFC 9700 §4.14).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from engram_memory.contract.binding import Binding
from engram_memory.engine.ports.rows import IssuedBindingRow
from engram_memory.engine.ports.sign_in import CodeRow, GrantRow, RefreshRow, SignInStore
from engram_memory.host.access.ending import end_grant
from engram_memory.host.access.people import digest, identity_of
from engram_memory.host.access.rules import Access, AccessRules, Identity, IdentityProvider
from engram_memory.host.access.rules_file import AccessRulesError
from engram_memory.host.bindings import SIGNED_IN, issue_binding, issued_row_of
from engram_memory.host.oauth.pending import PendingRequest
from engram_memory.host.oauth.sealed_tokens import TokenSeal
from engram_memory.host.oauth.upstream import CALLBACK_PATH, Upstream, UpstreamError, UpstreamRefused

CODE_LIFETIME_MS = 60_000
ISSUED_BY = SIGNED_IN
# A grant's access tokens stay in `bindings list --every-token` this long after they expire, then go at its
# next refresh (the grant itself, `access grants`, is the lasting record).
SPENT_TOKENS_KEPT_MS = 86_400_000


class GrantRefused(Exception):
    """The person or grant may not have tokens (any more); the message is one sentence for them."""


@dataclass(frozen=True, slots=True)
class Tokens:
    access_token: str
    expires_in_s: int
    scopes: tuple[str, ...]
    refresh_token: str
    binding: Binding


@dataclass(frozen=True, slots=True)
class SignInSettings:
    issuer: str  # this host's public URL (the authorization server's issuer)
    resource: str  # the MCP endpoint the tokens are for


def identity_json(identity: Identity, person_id: str | None) -> str:
    return json.dumps(
        {
            "issuer": identity.issuer,
            "subject": identity.subject,
            "email": identity.email,
            "email_verified": identity.email_verified,
            "groups": sorted(identity.groups),
            "person_id": person_id,
        },
        sort_keys=True,
    )


def identity_from_json(text: str) -> tuple[Identity, str | None]:
    data = json.loads(text)
    identity = Identity(
        issuer=str(data["issuer"]),
        subject=str(data["subject"]),
        email=data.get("email"),
        email_verified=bool(data.get("email_verified")),
        groups=frozenset(data.get("groups", [])),
    )
    return identity, data.get("person_id")


class SignInService:
    def __init__(
        self,
        store: SignInStore,
        key: Ed25519PrivateKey,
        settings: SignInSettings,
        rules: Callable[[], AccessRules],
        record_binding: Callable[[IssuedBindingRow], None],
        revoke_binding: Callable[[str], object],
        now_ms: Callable[[], int],
        seal: TokenSeal,
    ) -> None:
        self.store = store
        self.key = key
        self.settings = settings
        self._rules = rules
        self._record = record_binding
        self._revoke_binding = revoke_binding
        self.now_ms = now_ms
        self.seal = seal
        self._upstream: tuple[IdentityProvider, Upstream] | None = None

    def decide(self, identity: Identity) -> Access:
        """What the person may have now; GrantRefused when no rule admits them."""
        try:
            decision = self._rules().decide(identity)
        except AccessRulesError:
            raise GrantRefused("this server's access rules cannot be read: ask its administrator") from None
        if decision.access is None:
            why = f"rule '{decision.rule}' refuses" if decision.rule else "no access rule admits"
            raise GrantRefused(f"{why} {identity.principal} on this server: ask the team's administrator")
        return decision.access

    def identity_provider(self) -> IdentityProvider | None:
        """The team's OpenID Connect provider people may sign in with, as access.toml says now."""
        try:
            return self._rules().identity_provider
        except AccessRulesError:
            return None

    def upstream(self) -> Upstream | None:
        """The team's provider as access.toml names it now (a changed table makes a new client)."""
        provider = self.identity_provider()
        if provider is None:
            return None
        if self._upstream is None or self._upstream[0] != provider:
            self._upstream = (provider, Upstream(provider, self.key, self.settings.issuer + CALLBACK_PATH))
        return self._upstream[1]

    def sealed_upstream_token(self, identity: Identity, token: str | None) -> str | None:
        return None if token is None else self.seal.seal(token, identity.issuer, identity.subject)

    async def asked_upstream(self, grant: GrantRow) -> Identity | None:
        """The grant's person as the team's provider describes them now, kept on the grant; None for a grant
        the provider gave no refresh token for. GrantRefused (and the grant revoked) when the provider no
        longer signs them in or is no longer this server's; GrantRefused alone when it cannot be asked now."""
        if grant.upstream_token is None:
            return None
        identity, person_id = identity_from_json(grant.identity)
        upstream = self.upstream()
        token = self.seal.open(grant.upstream_token, identity.issuer, identity.subject)
        try:
            if upstream is None or upstream.provider.issuer != identity.issuer:
                raise GrantRefused(f"this server no longer signs people in through {identity.issuer}")
            if token is None:
                raise GrantRefused(f"the sign-in of {identity.principal} cannot be checked again: sign in again")
            try:
                fresh, kept = await upstream.refresh(token, identity)
            except UpstreamRefused as refused:
                raise GrantRefused(str(refused)) from None
        except GrantRefused as refused:
            await anyio.to_thread.run_sync(self.revoke, grant.grant_id, str(refused))
            raise
        except UpstreamError as failed:
            raise GrantRefused(f"{failed}: try again later") from None
        sealed = self.sealed_upstream_token(fresh, kept)
        await anyio.to_thread.run_sync(
            self.store.reidentify_grant, grant.grant_id, identity_json(fresh, person_id), sealed
        )
        return fresh

    def current_identity(self, grant: GrantRow) -> Identity:
        """The grant's person as they are now: an account on this host is read again (groups, disabled)."""
        identity, person_id = identity_from_json(grant.identity)
        if person_id is None:
            return identity
        person = self.store.person(person_id)
        if person is None or person.disabled_at_ms is not None or person.password_hash is None:
            raise GrantRefused(f"the account of {identity.principal} is disabled")
        return identity_of(person, identity.issuer)

    def could_have(self, binding: Binding) -> frozenset[str]:
        """The tools the rules give the person behind one of this server's access tokens now, for its
        grant's workspace (scope step-up); none for a grant that ended or a person no longer admitted."""
        grant = self.store.grant(binding.session)
        if grant is None or grant.revoked_at_ms is not None or grant.client_id != binding.agent_id:
            return frozenset()
        try:
            access = self.decide(self.current_identity(grant))
        except GrantRefused:
            return frozenset()
        return frozenset(access.grants) if grant.workspace in access.workspaces else frozenset()

    def consent(
        self,
        request: PendingRequest,
        identity: Identity,
        person_id: str | None,
        workspace: str,
        upstream_token: str | None = None,
    ) -> str:
        """Records the person's consent as a grant and returns the authorization code (once, never kept).
        `upstream_token`: the provider's refresh token from the sign-in, sealed."""
        access = self.decide(identity)
        if workspace not in access.workspaces:
            raise GrantRefused(f"the access rules do not give {identity.principal} the workspace {workspace}")
        now = self.now_ms()
        # The tools the client asked for that the rules give, or all they give: a grant never widens later.
        tools = access.grants & set(request.scopes) if request.scopes else access.grants
        grant = GrantRow(
            grant_id="grant_" + secrets.token_hex(12),
            client_id=request.client_id,
            principal=identity.principal,
            identity=identity_json(identity, person_id),
            workspace=workspace,
            scopes=tuple(sorted(tools)),
            resource=request.resource,
            created_at_ms=now,
            expires_at_ms=now + access.refresh_lifetime_s * 1000,
            upstream_token=upstream_token,
        )
        self.store.add_grant(grant)
        code = secrets.token_urlsafe(32)
        self.store.add_code(
            CodeRow(
                code_digest=digest(code),
                grant_id=grant.grant_id,
                redirect_uri=request.redirect_uri,
                redirect_uri_explicit=request.redirect_uri_explicit,
                code_challenge=request.code_challenge,
                expires_at_ms=now + CODE_LIFETIME_MS,
            )
        )
        return code

    def spend_code(self, code: str) -> tuple[CodeRow, GrantRow] | None:
        """The code's row and grant at its first presentation; a second one revokes the grant (RFC 6749
        §4.1.2) and answers None, as does an unknown code or a revoked grant."""
        taken = self.store.take_code(digest(code), self.now_ms())
        if taken is None:
            return None
        row, first = taken
        if not first:
            self.revoke(row.grant_id, "an authorization code was presented twice")
            return None
        grant = self.store.grant(row.grant_id)
        return None if grant is None or grant.revoked_at_ms is not None else (row, grant)

    def usable_refresh(self, token: str) -> tuple[RefreshRow, GrantRow] | None:
        """The refresh token's row and grant while it is unspent and its grant live, without spending it (a
        refresh that fails for a moment leaves it usable); a spent one is spent again here, which revokes its
        grant as a replay."""
        row = self.store.refresh_token(digest(token))
        if row is None:
            return None
        if row.used_at_ms is not None:
            self.spend_refresh(token)
            return None
        grant = self.store.grant(row.grant_id)
        if grant is None or grant.revoked_at_ms is not None or row.expires_at_ms <= self.now_ms():
            return None
        return row, grant

    def spend_refresh(self, token: str) -> tuple[RefreshRow, GrantRow] | None:
        """Like spend_code: a refresh token presented again revokes its whole grant."""
        now = self.now_ms()
        taken = self.store.take_refresh(digest(token), now)
        if taken is None:
            return None
        row, first = taken
        if not first:
            self.revoke(row.grant_id, "a refresh token was presented twice")
            return None
        grant = self.store.grant(row.grant_id)
        if grant is None or grant.revoked_at_ms is not None or row.expires_at_ms <= now:
            return None
        return row, grant

    def tokens(
        self, grant: GrantRow, scopes: tuple[str, ...] | None = None, identity: Identity | None = None
    ) -> Tokens:
        """A fresh access token and refresh token for the grant, as the rules decide now about the person
        (`identity` when the provider was just asked). GrantRefused (and the grant revoked) when they no
        longer admit the person or their workspace."""
        try:
            identity = identity or self.current_identity(grant)
            access = self.decide(identity)
            if grant.workspace not in access.workspaces:
                raise GrantRefused(f"the access rules no longer give {identity.principal} this workspace")
        except GrantRefused as refused:
            self.revoke(grant.grant_id, str(refused))
            raise
        asked = set(grant.scopes) if scopes is None else set(scopes) & set(grant.scopes)
        tools = access.grants & asked
        now = self.now_ms()
        issued = issue_binding(
            self.key,
            tenant=access.tenant,
            workspace=grant.workspace,
            principal=identity.principal,
            agent_id=grant.client_id,
            session=grant.grant_id,
            purpose_ref=access.purpose,
            grants=frozenset(tools),
            confirm_mutations=access.confirm_mutations,
            lifetime_s=access.access_lifetime_s,
            now_s=now // 1000,
            trust_class=access.trust_class,
            resource=grant.resource,
        )
        self._record(issued_row_of(issued.binding, issued_by=ISSUED_BY))
        self.store.forget_spent_tokens(grant.grant_id, ISSUED_BY, now - SPENT_TOKENS_KEPT_MS)
        refresh = secrets.token_urlsafe(32)
        ends = min(grant.expires_at_ms, now + access.refresh_lifetime_s * 1000)
        self.store.add_refresh(RefreshRow(digest(refresh), grant.grant_id, now, ends))
        return Tokens(
            access_token=issued.token,
            expires_in_s=access.access_lifetime_s,
            scopes=tuple(sorted(tools)),
            refresh_token=refresh,
            binding=issued.binding,
        )

    def revoke(self, grant_id: str, reason: str) -> None:
        """Ends the grant: its refresh tokens stop working and its live access tokens are revoked."""
        end_grant(self.store, self._revoke_binding, grant_id, reason, self.now_ms())
