"""Accounts on this host (host/access/people.py) on both vaults: a person chooses their own password with a
one-time code, signs in only while enrolled and enabled, and a wrong email costs what a wrong password does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram_memory.engine.ports.sign_in import ClientRow, GrantRow, SignInStore
from engram_memory.host.access.people import (
    PeopleError,
    add_person,
    digest,
    disable_person,
    enable_person,
    enrol,
    identity_of,
    new_enrolment,
    set_groups,
    signed_in,
)
from engram_memory.host.compose import open_vault
from engram_memory.host.settings import HostPaths

NOW = 1_800_000_000_000
PASSWORD = "correct horse battery staple"


@pytest.fixture
def store(paths: HostPaths) -> Iterator[SignInStore]:
    vault = open_vault(paths)
    try:
        yield vault.sign_in()
    finally:
        vault.close()


def test_a_person_enrols_once_with_their_code_and_then_signs_in(store: SignInStore) -> None:
    enrolment = add_person(store, " Alice@Acme.COM ", ["eng", "eng", "all"], now_ms=NOW, created_by="host:test")
    assert enrolment.person.email == "alice@acme.com" and enrolment.person.groups == ("all", "eng")
    assert enrolment.person.enrolment_digest == digest(enrolment.secret) != enrolment.secret
    assert signed_in(store, "alice@acme.com", PASSWORD) is None  # not enrolled yet
    with pytest.raises(PeopleError, match="at least 12 characters"):
        enrol(store, enrolment.secret, "short", now_ms=NOW)
    person = enrol(store, enrolment.secret, PASSWORD, now_ms=NOW + 1)
    assert person is not None and person.password_hash is not None and person.password_hash.startswith("$argon2id$")
    assert PASSWORD not in person.password_hash
    assert enrol(store, enrolment.secret, "another long password", now_ms=NOW + 2) is None  # spent
    assert signed_in(store, "ALICE@acme.com", PASSWORD) == person
    assert signed_in(store, "alice@acme.com", PASSWORD + "!") is None
    assert signed_in(store, "nobody@acme.com", PASSWORD) is None
    assert signed_in(store, "not an email", PASSWORD) is None


def test_an_expired_code_does_not_enrol(store: SignInStore) -> None:
    enrolment = add_person(store, "bob@acme.com", [], now_ms=NOW, created_by="host:test", enrol_for_s=60)
    assert enrol(store, enrolment.secret, PASSWORD, now_ms=NOW + 60_000) is None
    fresh = new_enrolment(store, "bob@acme.com", now_ms=NOW + 61_000)
    assert enrol(store, fresh.secret, PASSWORD, now_ms=NOW + 62_000) is not None


def test_a_new_code_keeps_the_old_password_until_it_is_used(store: SignInStore) -> None:
    first = add_person(store, "carol@acme.com", [], now_ms=NOW, created_by="host:test")
    enrol(store, first.secret, PASSWORD, now_ms=NOW)
    second = new_enrolment(store, "carol@acme.com", now_ms=NOW + 5)
    assert signed_in(store, "carol@acme.com", PASSWORD) is not None
    enrol(store, second.secret, "a brand new passphrase", now_ms=NOW + 6)
    assert signed_in(store, "carol@acme.com", PASSWORD) is None
    assert signed_in(store, "carol@acme.com", "a brand new passphrase") is not None


def test_disabling_stops_sign_in_and_revokes_the_persons_grants(store: SignInStore) -> None:
    enrolment = add_person(store, "dan@acme.com", ["eng"], now_ms=NOW, created_by="host:test")
    enrol(store, enrolment.secret, PASSWORD, now_ms=NOW)
    store.put_client(ClientRow("client-1", "{}", None, "registered", NOW))
    store.add_grant(GrantRow("grant-1", "client-1", "dan@acme.com", "{}", "w", (), "r", NOW, NOW + 10**9))
    revoked: list[str] = []
    disable_person(store, "dan@acme.com", now_ms=NOW + 10, revoke_token=revoked.append)
    assert signed_in(store, "dan@acme.com", PASSWORD) is None
    grant = store.grant("grant-1")
    assert grant is not None and grant.revoked_reason == "the person's account was disabled"
    with pytest.raises(PeopleError, match="is disabled"):
        new_enrolment(store, "dan@acme.com", now_ms=NOW + 11)
    enable_person(store, "dan@acme.com")
    assert signed_in(store, "dan@acme.com", PASSWORD) is not None


@pytest.mark.parametrize(
    ("email", "groups", "words"),
    [
        ("no-at-sign", [], "an email looks like"),
        ("a@b@c", [], "an email looks like"),
        ("a b@c.d", [], "an email looks like"),
        ("a@" + "b" * 260, [], "at most 254 bytes"),
        ("a@b.c", [""], "a group is a non-empty"),
        ("a@b.c", ["x\ny"], "a group is a non-empty"),
        ("a@b.c", [f"g{n}" for n in range(65)], "at most 64 groups"),
    ],
)
def test_bad_accounts_are_refused_in_one_line(store: SignInStore, email: str, groups: list[str], words: str) -> None:
    with pytest.raises(PeopleError, match=words):
        add_person(store, email, groups, now_ms=NOW, created_by="host:test")
    assert store.people() == []


def test_the_access_rules_see_a_person_by_this_hosts_issuer_email_and_groups(store: SignInStore) -> None:
    enrolment = add_person(store, "erin@acme.com", ["ops"], now_ms=NOW, created_by="host:test")
    person = set_groups(store, "erin@acme.com", ["ops", "eng-platform"])
    identity = identity_of(person, "https://memory.acme.com")
    assert (identity.issuer, identity.subject) == ("https://memory.acme.com", enrolment.person.person_id)
    assert identity.principal == "erin@acme.com" and identity.email_domain == "acme.com"
    assert identity.groups == frozenset({"ops", "eng-platform"})
