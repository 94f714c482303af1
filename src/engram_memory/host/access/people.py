"""Accounts the host creates for a small team without an identity provider of its own.

The operator adds a person by email and groups; the person chooses their own password with a one-time
enrolment secret (the operator never knows it), hashed with argon2id (argon2-cffi, RFC 9106's profile).
Such a person signs in to this host, whose access rules then see them as an identity this host's issuer
vouches for: their email (verified by the operator's say-so) and their groups.
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from engram_memory.engine.ports.sign_in import PersonRow, SignInStore
from engram_memory.host.access.ending import end_grant
from engram_memory.host.access.rules import Identity
from engram_memory.host.language.catalogue import _

DEFAULT_ENROLMENT_S = 7 * 86_400
MIN_PASSWORD_CHARS = 12
MAX_PASSWORD_BYTES = 1024
MAX_GROUPS = 64
_HASHER = PasswordHasher()


@functools.cache
def _decoy_hash() -> str:
    """Verified against when the email is unknown, so that a wrong email costs what a wrong password does."""
    return _HASHER.hash(secrets.token_urlsafe(16))


class PeopleError(Exception):
    """The operator's request cannot be done; the message is one line and names no secret."""


@dataclass(frozen=True, slots=True)
class Enrolment:
    """A person's one-time enrolment secret, shown once to the operator to hand over."""

    person: PersonRow
    secret: str


def digest(secret: str) -> str:
    """How the vault keeps every secret of sign-in: its SHA-256, in hex."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def normalised_email(email: str) -> str:
    text = unicodedata.normalize("NFC", email.strip()).lower()
    local, _at, domain = text.partition("@")
    if not local or not domain or "@" in domain or any(ch.isspace() or not ch.isprintable() for ch in text):
        raise PeopleError(_("an email looks like name@example.com"))
    if len(text.encode("utf-8")) > 254:
        raise PeopleError(_("an email is at most 254 bytes"))
    return text


def _groups(groups: list[str]) -> tuple[str, ...]:
    cleaned = sorted({unicodedata.normalize("NFC", group.strip()) for group in groups})
    if any(not group or not group.isprintable() or len(group.encode("utf-8")) > 256 for group in cleaned):
        raise PeopleError(_("a group is a non-empty printable name of at most 256 bytes"))
    if len(cleaned) > MAX_GROUPS:
        raise PeopleError(_("a person is in at most {max_groups} groups").format(max_groups=MAX_GROUPS))
    return tuple(cleaned)


def add_person(
    store: SignInStore,
    email: str,
    groups: list[str],
    *,
    now_ms: int,
    created_by: str,
    enrol_for_s: int = DEFAULT_ENROLMENT_S,
) -> Enrolment:
    secret = secrets.token_urlsafe(24)
    row = PersonRow(
        person_id="per_" + secrets.token_hex(10),
        email=normalised_email(email),
        groups=_groups(groups),
        password_hash=None,
        enrolment_digest=digest(secret),
        enrolment_expires_at_ms=now_ms + enrol_for_s * 1000,
        created_at_ms=now_ms,
        created_by=created_by,
    )
    if not store.add_person(row):
        raise PeopleError(
            _("{email} has an account already (engram-memory people enrol gives a new code)").format(email=row.email)
        )
    return Enrolment(person=row, secret=secret)


def _known(store: SignInStore, email: str) -> PersonRow:
    person = store.person_by_email(normalised_email(email))
    if person is None:
        raise PeopleError(_("no account for {email} (engram-memory people list)").format(email=normalised_email(email)))
    return person


def new_enrolment(store: SignInStore, email: str, *, now_ms: int, enrol_for_s: int = DEFAULT_ENROLMENT_S) -> Enrolment:
    """A fresh one-time secret (a lost one, or a new password); the old password works until it is used."""
    person = _known(store, email)
    if person.disabled_at_ms is not None:
        raise PeopleError(_("{email} is disabled (engram-memory people enable)").format(email=person.email))
    secret = secrets.token_urlsafe(24)
    changed = replace(person, enrolment_digest=digest(secret), enrolment_expires_at_ms=now_ms + enrol_for_s * 1000)
    store.update_person(changed)
    return Enrolment(person=changed, secret=secret)


def set_groups(store: SignInStore, email: str, groups: list[str]) -> PersonRow:
    changed = replace(_known(store, email), groups=_groups(groups))
    store.update_person(changed)
    return changed


def disable_person(store: SignInStore, email: str, *, now_ms: int, revoke_token: Callable[[str], object]) -> PersonRow:
    """Also ends every grant the person gave, with its live access tokens: their clients lose access at once."""
    person = _known(store, email)
    changed = replace(person, disabled_at_ms=now_ms)
    store.update_person(changed)
    for grant in store.grants(principal=person.email):
        end_grant(store, revoke_token, grant.grant_id, "the person's account was disabled", now_ms)
    return changed


def enable_person(store: SignInStore, email: str) -> PersonRow:
    """Lets a disabled person sign in again; the grants they gave stay ended."""
    changed = replace(_known(store, email), disabled_at_ms=None)
    store.update_person(changed)
    return changed


def enrol(store: SignInStore, secret: str, password: str, *, now_ms: int) -> PersonRow | None:
    """Sets the password of the person whose enrolment secret this is; None when it is unknown, spent or
    expired. Raises PeopleError for a password too short or too long."""
    check_password(password)
    return store.enrol(digest(secret), _HASHER.hash(password), now_ms)


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_CHARS:
        raise PeopleError(
            _("a password has at least {min_password_chars} characters").format(min_password_chars=MIN_PASSWORD_CHARS)
        )
    if len(password.encode("utf-8", "surrogatepass")) > MAX_PASSWORD_BYTES:
        raise PeopleError(
            _("a password has at most {max_password_bytes} bytes").format(max_password_bytes=MAX_PASSWORD_BYTES)
        )


def signed_in(store: SignInStore, email: str, password: str) -> PersonRow | None:
    """The person whose email and password these are, enrolled and not disabled; None otherwise, after the
    same work either way."""
    try:
        person = store.person_by_email(normalised_email(email))
    except PeopleError:
        person = None
    known = person is not None and person.password_hash is not None and person.disabled_at_ms is None
    hashed = person.password_hash if known and person is not None else None
    matched: bool
    try:
        matched = _HASHER.verify(hashed or _decoy_hash(), password[: MAX_PASSWORD_BYTES * 4])
    except (VerificationError, InvalidHashError):
        matched = False
    return person if known and matched else None


def identity_of(person: PersonRow, issuer: str) -> Identity:
    """The person as the access rules see them: this host's issuer vouches for their email and groups."""
    return Identity(
        issuer=issuer,
        subject=person.person_id,
        email=person.email,
        email_verified=True,
        groups=frozenset(person.groups),
    )
