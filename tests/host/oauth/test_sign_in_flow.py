"""Team sign-in end to end: `serve --http --public-url` as the authorization server of its own endpoint, the
official SDK's OAuth client registering itself (RFC 7591), a person signing in with an account on this host
and consenting in a browser (httpx following the pages as a browser does), then calling a tool with the
token whose binding the access rules decided."""

from __future__ import annotations

import anyio

from engram_memory.host.settings import HostPaths
from tests.support.http_agents import HttpServer
from tests.support.payloads import PURPOSE
from tests.support.sign_in import CALLBACK, Browser, Memory, agent_session, signed_in_binding


def test_the_sdk_client_registers_a_person_signs_in_and_the_token_carries_what_the_rules_decided(
    home: HostPaths, server: HttpServer
) -> None:
    storage = Memory()
    session = anyio.run(agent_session, server, "alice@acme.com", storage)
    assert session["tools"] == [
        "engram_memory_capture",
        "engram_memory_get",
        "engram_memory_request_admission",
        "engram_memory_search",
    ]
    search = session["search"]
    assert isinstance(search, dict) and search["ok"] is True, search
    assert storage.client is not None and storage.client.token_endpoint_auth_method == "none"
    assert storage.tokens is not None and storage.tokens.refresh_token
    binding = signed_in_binding(home, str(storage.client.client_id))
    assert (binding["tenant"], binding["workspace"], binding["principal"]) == ("acme", "team", "alice@acme.com")
    assert str(binding["session"]).startswith("grant_") and binding["purpose_ref"] == "team-notes"
    assert binding["grants"] == session["tools"]
    assert PURPOSE != "team-notes"  # the client never chose the purpose: the rules did


def test_a_person_the_rules_refuse_sees_why_and_gets_no_code(server: HttpServer) -> None:
    with Browser(server.url.removesuffix("/mcp")) as browser:
        registered = browser.client.post("/register", json={"redirect_uris": [CALLBACK], "client_name": "X"}).json()
        url = (
            f"/authorize?response_type=code&client_id={registered['client_id']}&redirect_uri={CALLBACK}"
            "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&state=s1"
        )
        answer = browser.authorize(url, "carl@acme.com")
    assert answer["page"] == "403"
    assert "rule &#39;contractors&#39; refuses carl@acme.com" in answer["text"]


def test_every_page_forbids_framing_and_caching(server: HttpServer) -> None:
    with Browser(server.url.removesuffix("/mcp")) as browser:
        page = browser.get("/sign-in?request=forged")
    assert page.status_code == 400
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
