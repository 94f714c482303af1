"""The vault's sign-in tables (engine/ports/sign_in.py) on both vaults: people and their one-time enrolment,
OAuth clients, grants and their revocation, and the single-use secrets, which two presentations at once
can never both spend."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_memory.engine.ports.rows import IssuedBindingRow, RevocationRow
from engram_memory.engine.ports.sign_in import ClientRow, CodeRow, GrantRow, PersonRow, RefreshRow, SessionRow
from engram_memory.stores.postgres.vault import PostgresKeyVault
from engram_memory.stores.sql.sign_in import SqlSignInStore
from engram_memory.stores.sqlite.vault import SQLiteKeyVault

NOW = 1_800_000_000_000


@pytest.fixture(params=["sqlite", "postgresql"])
def vault(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[SQLiteKeyVault | PostgresKeyVault]:
    opened = (
        SQLiteKeyVault(tmp_path / "vault.db")
        if request.param == "sqlite"
        else PostgresKeyVault(request.getfixturevalue("pg_url"))
    )
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def sign_in(vault: SQLiteKeyVault | PostgresKeyVault) -> SqlSignInStore:
    return vault.sign_in()


def _person(email: str = "alice@acme.com", **changes: object) -> PersonRow:
    row = PersonRow(
        person_id="per_" + email.split("@", maxsplit=1)[0],
        email=email,
        groups=("eng", "all"),
        password_hash=None,
        enrolment_digest="d-" + email,
        enrolment_expires_at_ms=NOW + 60_000,
        created_at_ms=NOW,
        created_by="host:test",
    )
    return dataclasses.replace(row, **changes)


def _client(sign_in: SqlSignInStore, client_id: str = "client-1") -> None:
    sign_in.put_client(ClientRow(client_id, '{"client_name":"Claude"}', None, "registered", NOW))


def _grant(sign_in: SqlSignInStore, grant_id: str = "grant-1", principal: str = "alice@acme.com") -> GrantRow:
    _client(sign_in)
    row = GrantRow(grant_id, "client-1", principal, "{}", "platform", ("b", "a"), "https://m/mcp", NOW, NOW + 10**9)
    sign_in.add_grant(row)
    return row


def test_a_person_is_added_once_per_email_and_reads_back(sign_in: SqlSignInStore) -> None:
    assert sign_in.add_person(_person())
    assert not sign_in.add_person(_person(person_id="per_other"))
    stored = sign_in.person("per_alice")
    assert stored is not None and stored.groups == ("all", "eng")
    assert sign_in.person_by_email("alice@acme.com") == stored
    assert sign_in.person_by_email("bob@acme.com") is None
    sign_in.add_person(_person("bob@acme.com"))
    assert [row.email for row in sign_in.people()] == ["alice@acme.com", "bob@acme.com"]
    sign_in.update_person(_person(groups=("ops",), disabled_at_ms=NOW + 5))
    changed = sign_in.person("per_alice")
    assert changed is not None and changed.groups == ("ops",) and changed.disabled_at_ms == NOW + 5


def test_an_enrolment_secret_sets_the_password_once_and_only_before_it_expires(sign_in: SqlSignInStore) -> None:
    sign_in.add_person(_person())
    sign_in.add_person(_person("late@acme.com", enrolment_expires_at_ms=NOW - 1))
    sign_in.add_person(_person("gone@acme.com", disabled_at_ms=NOW - 1))
    enrolled = sign_in.enrol("d-alice@acme.com", "$argon2id$hash", NOW)
    assert enrolled is not None and enrolled.password_hash == "$argon2id$hash" and enrolled.enrolment_digest is None
    assert sign_in.enrol("d-alice@acme.com", "$argon2id$other", NOW) is None
    assert sign_in.enrol("d-late@acme.com", "$argon2id$x", NOW) is None
    assert sign_in.enrol("d-gone@acme.com", "$argon2id$x", NOW) is None
    assert sign_in.enrol("no-such", "$argon2id$x", NOW) is None
    again = sign_in.person("per_alice")
    assert again is not None and again.password_hash == "$argon2id$hash"


def test_a_registered_client_is_never_replaced_but_a_document_client_is_refreshed(sign_in: SqlSignInStore) -> None:
    _client(sign_in)
    sign_in.put_client(ClientRow("client-1", '{"client_name":"Evil"}', None, "registered", NOW + 1))
    stored = sign_in.client("client-1")
    assert stored is not None and stored.metadata == '{"client_name":"Claude"}'
    url = "https://app.example/client.json"
    sign_in.put_client(ClientRow(url, '{"client_name":"A"}', None, "document", NOW))
    sign_in.put_client(ClientRow(url, '{"client_name":"B"}', None, "document", NOW + 1))
    document = sign_in.client(url)
    assert document is not None and document.metadata == '{"client_name":"B"}' and document.registered_at_ms == NOW
    assert sign_in.client("unknown") is None


def test_grants_list_by_person_and_revoke_once(sign_in: SqlSignInStore) -> None:
    first = _grant(sign_in)
    sign_in.add_grant(GrantRow("grant-2", "client-1", "bob@acme.com", "{}", "w", (), "r", NOW + 1, NOW + 9))
    stored = sign_in.grant("grant-1")
    assert stored is not None and stored.scopes == ("a", "b") and stored.revoked_at_ms is None
    assert (stored.client_id, stored.principal, stored.workspace) == (first.client_id, first.principal, "platform")
    assert [row.grant_id for row in sign_in.grants()] == ["grant-1", "grant-2"]
    assert [row.grant_id for row in sign_in.grants(principal="bob@acme.com")] == ["grant-2"]
    assert sign_in.revoke_grant("grant-1", NOW + 5, "refresh token replayed")
    assert not sign_in.revoke_grant("grant-1", NOW + 6, "person revoked it")
    revoked = sign_in.grant("grant-1")
    assert revoked is not None and (revoked.revoked_at_ms, revoked.revoked_reason) == (
        NOW + 5,
        "refresh token replayed",
    )


def test_a_code_and_a_refresh_token_are_spent_by_their_first_presentation(sign_in: SqlSignInStore) -> None:
    _grant(sign_in)
    sign_in.add_code(CodeRow("c1", "grant-1", "http://127.0.0.1:5/cb", True, "challenge", NOW + 60_000))
    taken = sign_in.take_code("c1", NOW)
    assert taken is not None and taken[1] is True and taken[0].redirect_uri_explicit is True
    replay = sign_in.take_code("c1", NOW + 1)
    assert replay is not None and replay[1] is False and replay[0].used_at_ms == NOW
    assert sign_in.take_code("c2", NOW) is None
    sign_in.add_refresh(RefreshRow("r1", "grant-1", NOW, NOW + 10**6))
    first = sign_in.take_refresh("r1", NOW + 2)
    assert first is not None and first[1] is True
    second = sign_in.take_refresh("r1", NOW + 3)
    assert second is not None and second[1] is False and second[0].used_at_ms == NOW + 2
    assert sign_in.take_refresh("r2", NOW) is None


def test_two_presentations_at_once_spend_a_refresh_token_once(sign_in: SqlSignInStore) -> None:
    _grant(sign_in)
    for n in range(20):
        sign_in.add_refresh(RefreshRow(f"t{n}", "grant-1", NOW, NOW + 10**6))
    firsts: list[bool] = []
    lock = threading.Lock()

    def present(digest: str) -> None:
        taken = sign_in.take_refresh(digest, NOW)
        with lock:
            firsts.append(taken is not None and taken[1])

    for n in range(20):
        threads = [threading.Thread(target=present, args=(f"t{n}",)) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert sum(firsts) == 20 and len(firsts) == 40


def test_a_session_reads_until_it_expires_or_ends(sign_in: SqlSignInStore) -> None:
    sign_in.add_session(SessionRow("s1", '{"subject":"1"}', NOW, NOW + 100))
    assert sign_in.session("s1", NOW + 99) == SessionRow("s1", '{"subject":"1"}', NOW, NOW + 100)
    assert sign_in.session("s1", NOW + 100) is None
    sign_in.end_session("s1")
    assert sign_in.session("s1", NOW) is None


def test_a_provider_token_travels_from_session_to_grant_and_is_replaced_at_a_refresh(sign_in: SqlSignInStore) -> None:
    _client(sign_in)
    sign_in.add_session(SessionRow("s2", '{"subject":"2"}', NOW, NOW + 100, "sealed-1"))
    session = sign_in.session("s2", NOW)
    assert session is not None and session.upstream_token == "sealed-1"
    row = GrantRow(
        "grant-9", "client-1", "p", '{"groups":["eng"]}', "w", (), "r", NOW, NOW + 9, upstream_token="sealed-1"
    )
    sign_in.add_grant(row)
    assert sign_in.grant("grant-9") == row
    sign_in.reidentify_grant("grant-9", '{"groups":[]}', "sealed-2")
    changed = sign_in.grant("grant-9")
    assert changed is not None and (changed.identity, changed.upstream_token) == ('{"groups":[]}', "sealed-2")
    assert sign_in.grant("grant-1") is None  # no other grant touched


def _issued(
    token_id: str, session: str, issued_at_ms: int, expires_at_ms: int, by: str = "sign-in"
) -> IssuedBindingRow:
    return IssuedBindingRow(
        token_id,
        "acme",
        "team",
        "p",
        "client-1",
        session,
        "notes",
        (),
        False,
        "standard",
        issued_at_ms,
        expires_at_ms,
        by,
    )


def test_a_grants_spent_tokens_go_and_only_its_newest_is_listed(
    vault: SQLiteKeyVault | PostgresKeyVault, sign_in: SqlSignInStore
) -> None:
    day = 86_400_000
    for row in (
        _issued("bind_spent", "grant-1", NOW - 3 * day, NOW - 2 * day),
        _issued("bind_revoked", "grant-1", NOW - 3 * day + 1, NOW - 2 * day),
        _issued("bind_recent", "grant-1", NOW - day // 2, NOW - day // 4),
        _issued("bind_live", "grant-1", NOW, NOW + 600_000),
        _issued("bind_other", "grant-2", NOW - 3 * day, NOW - 2 * day),
        _issued("bind_by_hand", "grant-1", NOW - 3 * day, NOW - 2 * day, by="host:alice"),
    ):
        vault.record_issued(row)
    vault.revoke(RevocationRow("bind_revoked", NOW - 2 * day, "host:alice"))
    assert sign_in.forget_spent_tokens("grant-1", "sign-in", NOW - day) == 1
    every = [issued.token_id for issued, _ in vault.issued(10)]
    assert every == ["bind_live", "bind_recent", "bind_revoked", "bind_by_hand", "bind_other"]
    folded = [issued.token_id for issued, _ in vault.issued(10, latest_only_for="sign-in")]
    assert folded == ["bind_live", "bind_by_hand", "bind_other"]
    assert [issued.token_id for issued, _ in vault.issued(2, latest_only_for="sign-in")] == [
        "bind_live",
        "bind_by_hand",
    ]
