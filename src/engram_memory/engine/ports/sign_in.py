"""What the host keeps to let people sign in and their clients hold tokens: the vault's sign-in tables.

People with an account on this host, OAuth clients (registered, or known by their metadata document),
grants (one person's consent to one client: the family of its refresh tokens), authorization codes,
refresh tokens and browser sessions. Every secret among them (codes, refresh tokens, session ids,
enrolment secrets, client secrets) is kept only as its SHA-256 digest; passwords as argon2id hashes. The
one secret that must be presented again, the team provider's refresh token, is kept sealed (AES-GCM under a
key derived from the home's secret).
The engine never reads these: the host's authorization server does, through this port.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class PersonRow:
    person_id: str
    email: str  # lower-cased; unique
    groups: tuple[str, ...]  # sorted
    password_hash: str | None  # argon2id, None until the person enrols
    enrolment_digest: str | None  # of the one-time enrolment secret; None once used
    enrolment_expires_at_ms: int | None
    created_at_ms: int
    created_by: str
    disabled_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ClientRow:
    client_id: str
    metadata: str  # the client's metadata as JSON (RFC 7591), as registered or as its document said
    secret_digest: str | None  # confidential clients only
    source: str  # "registered" (RFC 7591) or "document" (a client id metadata document)
    registered_at_ms: int
    revoked_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class GrantRow:
    """A person's consent to one client; the access rules' decision is taken again at every refresh."""

    grant_id: str
    client_id: str
    principal: str
    identity: str  # JSON: issuer, subject, email, email_verified, groups, person_id
    workspace: str
    scopes: tuple[str, ...]
    resource: str
    created_at_ms: int
    expires_at_ms: int  # the refresh family's end
    revoked_at_ms: int | None = None
    revoked_reason: str | None = None
    upstream_token: str | None = None  # the team provider's refresh token, sealed; None for accounts here


@dataclass(frozen=True, slots=True)
class CodeRow:
    code_digest: str
    grant_id: str
    redirect_uri: str
    redirect_uri_explicit: bool
    code_challenge: str
    expires_at_ms: int
    used_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class RefreshRow:
    token_digest: str
    grant_id: str
    issued_at_ms: int
    expires_at_ms: int
    used_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class SessionRow:
    """A browser signed in to this host (sign-in and consent pages), by the digest of its cookie."""

    session_digest: str
    identity: str  # JSON, as GrantRow.identity
    created_at_ms: int
    expires_at_ms: int
    upstream_token: str | None = None  # as GrantRow.upstream_token


class SignInStore(Protocol):
    """Every method commits on its own. The single-use ones (`take_code`, `take_refresh`) are atomic and
    answer the row with whether this presentation was its first (a second one is a replay)."""

    # people
    def add_person(self, row: PersonRow) -> bool:
        """False (and nothing written) when a person with that email exists."""
        ...

    def person(self, person_id: str) -> PersonRow | None: ...
    def person_by_email(self, email: str) -> PersonRow | None: ...
    def people(self) -> list[PersonRow]: ...
    def update_person(self, row: PersonRow) -> None: ...

    def enrol(self, enrolment_digest: str, password_hash: str, now_ms: int) -> PersonRow | None:
        """Sets the password of the person whose unexpired enrolment secret this is and spends the secret;
        None when no such person (a secret is good once)."""
        ...

    # clients
    def put_client(self, row: ClientRow) -> None:
        """Adds the client, or replaces a document-known client's cached metadata."""
        ...

    def client(self, client_id: str) -> ClientRow | None: ...

    def revoke_client(self, client_id: str, at_ms: int) -> bool:
        """Turns the client away from now on (registered or known by its document); False when it is unknown
        or was revoked already."""
        ...

    # grants
    def add_grant(self, row: GrantRow) -> None: ...
    def grant(self, grant_id: str) -> GrantRow | None: ...
    def grants(self, *, principal: str | None = None) -> list[GrantRow]: ...

    def reidentify_grant(self, grant_id: str, identity: str, upstream_token: str | None) -> None:
        """The person as the provider describes them now, and its (possibly rotated) refresh token."""
        ...

    def revoke_grant(self, grant_id: str, at_ms: int, reason: str) -> bool:
        """False when it was revoked already (the first reason stays)."""
        ...

    def forget_spent_tokens(self, grant_id: str, issued_by: str, expired_before_ms: int) -> int:
        """Drops the grant's access tokens (bindings `issued_by` with it as their session) that expired before
        `expired_before_ms` and were not revoked; how many. A refresh issues one each time."""
        ...

    def live_bindings(self, grant_id: str, now_ms: int) -> list[str]:
        """The token ids of the grant's access tokens (bindings issued with it as their session) that have
        not expired, revoked or not: what revoking the grant must revoke too."""
        ...

    # authorization codes and refresh tokens
    def add_code(self, row: CodeRow) -> None: ...
    def take_code(self, code_digest: str, now_ms: int) -> tuple[CodeRow, bool] | None: ...
    def add_refresh(self, row: RefreshRow) -> None: ...
    def refresh_token(self, token_digest: str) -> RefreshRow | None:
        """The row, spent or not, without spending it."""
        ...

    def take_refresh(self, token_digest: str, now_ms: int) -> tuple[RefreshRow, bool] | None: ...

    # browser sessions
    def add_session(self, row: SessionRow) -> None: ...
    def session(self, session_digest: str, now_ms: int) -> SessionRow | None: ...
    def end_session(self, session_digest: str) -> None: ...
