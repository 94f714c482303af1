"""Connected apps: the clients people let in when they signed in, and revoking one (with its live tokens)."""

from __future__ import annotations

import time
from urllib.parse import unquote_plus

from engram_memory.engine.ports.sign_in import ClientRow, GrantRow
from engram_memory.host.bindings import issue_binding, issued_row_of
from engram_memory.host.compose import open_vault
from engram_memory.host.keys.files import load_signing_key
from tests.host.console.conftest import Site

GRANT = "grant_" + "ab" * 12


def _grant(site: Site) -> str:
    """A grant made at sign-in, with one live access token (a binding whose session is the grant)."""
    now = int(time.time() * 1000)
    vault = open_vault(site.paths)
    try:
        store = vault.sign_in()
        store.put_client(ClientRow("client-1", '{"client_name": "Claude Code"}', None, "registered", now))
        scopes = ("engram_memory_get", "engram_memory_search")
        store.add_grant(
            GrantRow(GRANT, "client-1", "alice@acme.com", "{}", "team", scopes, "http://x/mcp", now, now + 10**8)
        )
    finally:
        vault.close()
    token = issue_binding(
        load_signing_key(site.paths),
        tenant="acme",
        workspace="team",
        principal="alice@acme.com",
        agent_id="client-1",
        session=GRANT,
        purpose_ref="team-notes",
        grants=frozenset({"engram_memory_search"}),
        confirm_mutations=False,
        lifetime_s=600,
        now_s=now // 1000,
        resource="http://x/mcp",
    )
    site.engine.record_binding(issued_row_of(token.binding, issued_by="sign-in"))
    return token.binding.token_id


def test_connected_apps_lists_grants_and_revoking_asks_first_then_ends_the_tokens(signed_in: Site) -> None:
    token_id = _grant(signed_in)
    page = signed_in.client.get("/apps").text
    assert "Claude Code" in page and "alice@acme.com" in page and "search" in page and "status-active" in page
    asked = signed_in.post("/apps/revoke", {"grant_id": GRANT})
    assert asked.status_code == 200 and 'name="confirmed" value="yes"' in asked.text
    assert "status-revoked" not in signed_in.client.get("/apps").text
    done = signed_in.post("/apps/revoke", {"grant_id": GRANT, "confirmed": "yes"})
    assert "Revoked" in done.headers["location"]
    assert "status-revoked" in signed_in.client.get("/apps").text
    assert signed_in.engine.is_revoked(token_id)
    again = signed_in.post("/apps/revoke", {"grant_id": GRANT, "confirmed": "yes"})
    assert "already" in again.headers["location"]


def test_revoking_what_is_not_a_grant_of_this_home_is_refused(signed_in: Site) -> None:
    for grant_id in ("grant_" + "cd" * 12, "nonsense"):
        answer = signed_in.post("/apps/revoke", {"grant_id": grant_id, "confirmed": "yes"})
        assert answer.status_code == 303 and "Revoked" not in answer.headers["location"]
    assert signed_in.post("/apps/revoke", {"grant_id": GRANT}, csrf=False).status_code == 403


def test_turning_a_client_away_asks_first_then_ends_its_grants_for_good(signed_in: Site) -> None:
    token_id = _grant(signed_in)
    asked = signed_in.post("/apps/turn-away", {"client_id": "client-1"})
    assert asked.status_code == 200 and 'name="confirmed" value="yes"' in asked.text
    assert not signed_in.engine.is_revoked(token_id)
    done = signed_in.post("/apps/turn-away", {"client_id": "client-1", "confirmed": "yes"})
    assert "1 grant ended" in unquote_plus(done.headers["location"])
    page = signed_in.client.get("/apps").text
    assert "turned away" in page and "status-revoked" in page
    assert signed_in.engine.is_revoked(token_id)
    again = signed_in.post("/apps/turn-away", {"client_id": "client-1", "confirmed": "yes"})
    assert "already" in again.headers["location"]
    unknown = signed_in.post("/apps/turn-away", {"client_id": "client-2", "confirmed": "yes"})
    assert "not a client" in unquote_plus(unknown.headers["location"])
    assert signed_in.post("/apps/turn-away", {"client_id": "client-1"}, csrf=False).status_code == 403
