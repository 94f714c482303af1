"""Attempts to get, keep or misuse access through the sign-in server, each of which must fail: no or plain PKCE,
an unregistered redirect URI, a code presented twice, a redirect URI changed at the token endpoint, a refresh
token replayed, a forged consent, a token for another endpoint, an expired or revoked token."""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

from engram_memory.host.bindings import issue_binding
from engram_memory.host.keys.files import load_signing_key
from engram_memory.host.settings import HostPaths
from tests.host.clirun import cli
from tests.support.sign_in import CALLBACK, PASSWORD, Browser, Flow, hidden, pkce, signed_in_binding


def test_tokens_work_and_refresh_rotates(home: HostPaths, flow: Flow) -> None:
    verifier, challenge = pkce()
    tokens = flow.exchange(flow.code(challenge), verifier).json()
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 600
    assert flow.list_tools(tokens["access_token"]).status_code == 200
    renewed = flow.refresh(tokens["refresh_token"]).json()
    assert renewed["refresh_token"] != tokens["refresh_token"]
    assert flow.list_tools(renewed["access_token"]).status_code == 200

    def listed(*flags: str) -> list[object]:
        every = json.loads(cli("bindings", "list", "--json", "--home", home.home, *flags).stdout)
        return [item["token_id"] for item in every if item["agent_id"] == flow.client_id]

    assert len(listed()) == 1  # one per grant: its newest token
    assert len(listed("--every-token")) == 2


def test_authorize_refuses_missing_or_plain_pkce_and_an_unregistered_redirect(flow: Flow) -> None:
    missing = flow.http.get(flow.authorize_url(None))
    plain = flow.http.get(flow.authorize_url("x" * 43, code_challenge_method="plain"))
    for answer in (missing, plain):
        assert answer.status_code in (302, 400)
        assert "code=" not in answer.headers.get("location", "")
        assert "/sign-in" not in answer.headers.get("location", "")
    elsewhere = flow.http.get(flow.authorize_url(pkce()[1], redirect_uri="https://evil.example/steal"))
    assert elsewhere.status_code == 400  # never redirected to an address the client did not register
    assert "location" not in elsewhere.headers


def test_a_code_presented_twice_revokes_everything_it_gave(flow: Flow) -> None:
    verifier, challenge = pkce()
    code = flow.code(challenge)
    first = flow.exchange(code, verifier).json()
    again = flow.exchange(code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert flow.refresh(first["refresh_token"]).json()["error"] == "invalid_grant"
    assert flow.list_tools(first["access_token"]).status_code == 401


def test_the_verifier_and_the_redirect_uri_must_match_the_authorization(flow: Flow) -> None:
    verifier, challenge = pkce()
    wrong_verifier = flow.exchange(flow.code(challenge), pkce()[0])
    assert wrong_verifier.status_code == 400 and wrong_verifier.json()["error"] == "invalid_grant"
    moved = flow.exchange(flow.code(challenge), verifier, redirect_uri="http://127.0.0.1:9/other")
    assert moved.status_code == 400 and moved.json()["error"] == "invalid_request"


def test_a_replayed_refresh_token_revokes_its_whole_family(flow: Flow) -> None:
    verifier, challenge = pkce()
    first = flow.exchange(flow.code(challenge), verifier).json()
    second = flow.refresh(first["refresh_token"]).json()
    replay = flow.refresh(first["refresh_token"])
    assert replay.status_code == 400 and replay.json()["error"] == "invalid_grant"
    assert flow.refresh(second["refresh_token"]).json()["error"] == "invalid_grant"
    assert flow.list_tools(second["access_token"]).status_code == 401


def test_a_forged_consent_gives_no_code(flow: Flow) -> None:
    _, challenge = pkce()
    with Browser(flow.base) as browser:
        sign_in = browser.get(browser.get(flow.authorize_url(challenge)).headers["location"])
        request = hidden(sign_in.text, "request")
        signed = browser.post("/sign-in", {"request": request, "email": "alice@acme.com", "password": PASSWORD})
        browser.get(signed.headers["location"])
        forged = browser.post(
            "/consent", {"request": request, "csrf": "forged", "workspace": "team", "decision": "allow"}
        )
    assert forged.status_code == 403 and "location" not in forged.headers


def test_a_wrong_password_signs_nobody_in(flow: Flow) -> None:
    _, challenge = pkce()
    with Browser(flow.base) as browser:
        sign_in = browser.get(browser.get(flow.authorize_url(challenge)).headers["location"])
        request = hidden(sign_in.text, "request")
        wrong = browser.post("/sign-in", {"request": request, "email": "alice@acme.com", "password": "nope" * 4})
        assert wrong.status_code == 401 and "set-cookie" not in wrong.headers
        consent = browser.get("/consent?" + urlencode({"request": request}))
    assert consent.status_code == 303 and consent.headers["location"].startswith("/sign-in")


def test_a_token_for_another_endpoint_or_expired_is_refused_with_401_and_refresh_works(
    home: HostPaths, flow: Flow
) -> None:
    verifier, challenge = pkce()
    tokens = flow.exchange(flow.code(challenge), verifier).json()
    grant_id = str(signed_in_binding(home, flow.client_id)["session"])
    key = load_signing_key(home)
    common = {
        "tenant": "acme",
        "workspace": "team",
        "principal": "alice@acme.com",
        "agent_id": flow.client_id,
        "session": grant_id,
        "purpose_ref": "team-notes",
        "grants": frozenset({"engram_memory_search"}),
        "confirm_mutations": False,
    }
    elsewhere = issue_binding(key, **common, lifetime_s=600, now_s=int(time.time()), resource="https://other/mcp")
    # What the grant's own access token is once its ten minutes are up.
    expired = issue_binding(key, **common, lifetime_s=600, now_s=int(time.time()) - 3600, resource=flow.mcp)
    for token in (elsewhere.token, expired.token):
        answer = flow.list_tools(token)
        assert answer.status_code == 401
        assert 'error="invalid_token"' in answer.headers["www-authenticate"]
        assert "resource_metadata=" in answer.headers["www-authenticate"]
    renewed = flow.refresh(tokens["refresh_token"])
    assert renewed.status_code == 200, renewed.text
    assert flow.list_tools(renewed.json()["access_token"]).status_code == 200


def test_a_revoked_client_is_turned_away_and_its_grants_end(home: HostPaths, flow: Flow) -> None:
    verifier, challenge = pkce()
    tokens = flow.exchange(flow.code(challenge), verifier).json()
    revoked = cli("access", "revoke-client", flow.client_id, "--home", home.home)
    assert revoked.code == 0 and revoked.stdout.strip() == f"{flow.client_id}: revoked; 1 grant ended"
    assert flow.list_tools(tokens["access_token"]).status_code == 401
    assert flow.refresh(tokens["refresh_token"]).json()["error"] in ("invalid_client", "invalid_grant")
    verifier, challenge = pkce()
    assert flow.http.get(flow.authorize_url(challenge)).status_code == 400  # nobody signs in to it any more
    again = cli("access", "revoke-client", flow.client_id, "--home", home.home)
    assert again.stdout.strip() == f"{flow.client_id}: was revoked already; 0 grants ended"
    unknown = cli("access", "revoke-client", "no-such-client", "--home", home.home)
    assert unknown.code != 0 and "no client no-such-client" in unknown.stderr


def test_revoking_a_refresh_token_ends_the_grant(flow: Flow) -> None:
    verifier, challenge = pkce()
    tokens = flow.exchange(flow.code(challenge), verifier).json()
    revoked = flow.http.post(
        "/revoke",
        data={"client_id": flow.client_id, "token": tokens["refresh_token"], "token_type_hint": "refresh_token"},
    )
    assert revoked.status_code == 200
    assert flow.list_tools(tokens["access_token"]).status_code == 401
    assert flow.refresh(tokens["refresh_token"]).json()["error"] == "invalid_grant"


def test_a_client_asking_for_a_secret_is_not_registered(flow: Flow) -> None:
    answer = flow.http.post(
        "/register", json={"redirect_uris": [CALLBACK], "token_endpoint_auth_method": "client_secret_post"}
    )
    assert answer.status_code == 400 and answer.json()["error"] == "invalid_client_metadata"


def test_a_change_of_groups_or_a_disabled_account_takes_effect_at_the_next_refresh(home: HostPaths, flow: Flow) -> None:
    verifier, challenge = pkce()
    first = flow.exchange(flow.code(challenge, "dan@acme.com"), verifier).json()
    moved = cli("people", "groups", "dan@acme.com", "--group", "contractors", "--home", home.home)
    assert moved.code == 0, moved
    refused = flow.refresh(first["refresh_token"])
    assert refused.status_code == 400 and "contractors" in refused.json()["error_description"]
    assert flow.list_tools(first["access_token"]).status_code == 401  # its grant was revoked with it
    cli("people", "groups", "dan@acme.com", "--group", "eng", "--home", home.home)
    verifier, challenge = pkce()
    second = flow.exchange(flow.code(challenge, "dan@acme.com"), verifier).json()
    assert cli("people", "disable", "dan@acme.com", "--home", home.home).code == 0
    assert flow.list_tools(second["access_token"]).status_code == 401  # at once, not at the next refresh
    assert flow.refresh(second["refresh_token"]).json()["error"] == "invalid_grant"


def test_the_host_lists_a_persons_grants_and_revokes_one(home: HostPaths, flow: Flow) -> None:
    verifier, challenge = pkce()
    tokens = flow.exchange(flow.code(challenge), verifier).json()
    listed = json.loads(cli("access", "grants", "--email", "ALICE@acme.com", "--json", "--home", home.home).stdout)
    (grant,) = [item for item in listed if item["client_id"] == flow.client_id]
    assert (grant["status"], grant["client"], grant["workspace"]) == ("active", "Attacker?", "team")
    assert grant["tools"] == sorted(grant["tools"]) and "engram_memory_search" in grant["tools"]
    revoked = cli("access", "revoke", grant["grant_id"], "--home", home.home)
    assert revoked.code == 0 and "revoked" in revoked.stdout
    assert flow.list_tools(tokens["access_token"]).status_code == 401
    assert flow.refresh(tokens["refresh_token"]).json()["error"] == "invalid_grant"
    again = json.loads(cli("access", "grants", "--json", "--home", home.home).stdout)
    assert next(item for item in again if item["grant_id"] == grant["grant_id"])["status"] == "revoked"
    unknown = cli("access", "revoke", "grant_nope", "--home", home.home)
    assert unknown.code != 0 and unknown.stderr.strip() == (
        "engram-memory: error: no grant grant_nope (engram-memory access grants lists them)"
    )
