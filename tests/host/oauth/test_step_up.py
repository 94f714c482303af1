"""Scope step-up: a client whose token lacks a tool the access rules give its person is answered 403
`insufficient_scope` naming the scope to ask for, and the official SDK's client then authorizes again by
itself and retries. A tool the rules do not give, or a binding from `bind`, keeps the contract's answer,
`-32602 Unknown tool`, with nothing that tells the tool exists."""

from __future__ import annotations

import json

import anyio
import httpx
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from engram_memory.host.settings import HostPaths
from mcp import Client
from tests.support.homes import bind
from tests.support.http_agents import HttpServer
from tests.support.sign_in import CALLBACK, MCP_HEADERS, Browser, Flow, Memory, pkce

SEARCH = "engram_memory_search"
CAPTURE = "engram_memory_capture"
FORGET = "engram_memory_forget"  # the rules give nobody this one


def _call(name: str, request_id: int = 7) -> dict[str, object]:
    arguments = {"query": "deploys", "purpose_ref": "team-notes"}
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def _search_only(flow: Flow) -> dict[str, str]:
    """Tokens for a client that asked for search alone (the rules would give it four tools)."""
    verifier, challenge = pkce()
    with Browser(flow.base) as browser:
        answer = browser.authorize(flow.authorize_url(challenge, scope=SEARCH), "alice@acme.com")
    tokens = flow.exchange(answer["code"], verifier)
    assert tokens.status_code == 200, tokens.text
    assert tokens.json()["scope"] == SEARCH
    return dict(tokens.json())


def test_a_tool_the_rules_give_but_the_token_lacks_is_answered_insufficient_scope(flow: Flow) -> None:
    tokens = _search_only(flow)
    headers = {**MCP_HEADERS, "authorization": f"Bearer {tokens['access_token']}"}
    answer = flow.http.post("/mcp", json=_call(CAPTURE), headers=headers)
    assert answer.status_code == 403
    challenge = answer.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert f'scope="{CAPTURE} {SEARCH}"' in challenge
    assert f'resource_metadata="{flow.base}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert answer.json() == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32602, "message": "Unknown tool"}}
    granted = flow.http.post("/mcp", json=_call(SEARCH), headers=headers)
    assert granted.status_code == 200 and "result" in granted.json()


def test_a_tool_the_rules_do_not_give_is_an_unknown_tool_as_the_contract_says(flow: Flow) -> None:
    tokens = _search_only(flow)
    headers = {**MCP_HEADERS, "authorization": f"Bearer {tokens['access_token']}"}
    for name in (FORGET, "engram_memory_no_such_tool"):
        answer = flow.http.post("/mcp", json=_call(name), headers=headers)
        assert answer.status_code == 200
        assert answer.json()["error"] == {"code": -32602, "message": "Unknown tool"}
        assert "www-authenticate" not in answer.headers


def test_a_binding_from_bind_never_steps_up(home: HostPaths, server: HttpServer) -> None:
    token = bind(home, grants=frozenset({SEARCH})).token
    headers = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
    answer = httpx.post(server.url, json=_call(CAPTURE), headers=headers, timeout=30)
    assert answer.status_code == 200 and answer.json()["error"]["code"] == -32602


def test_the_sdk_client_steps_up_by_itself_and_the_call_goes_through(flow: Flow, server: HttpServer) -> None:
    tokens = _search_only(flow)
    # The SDK's client starts from the narrow token and the registration it was issued to.

    storage = Memory()
    storage.tokens = OAuthToken.model_validate(tokens)
    storage.client = OAuthClientInformationFull.model_validate(
        {"client_id": flow.client_id, "redirect_uris": [CALLBACK], "token_endpoint_auth_method": "none"}
    )
    asked: list[str] = []

    async def redirect(url: str) -> None:
        asked.append(url)

    def sign_in() -> dict[str, str]:
        with Browser(flow.base) as browser:
            return browser.authorize(asked[-1], "alice@acme.com")

    async def callback() -> AuthorizationCodeResult:
        answer = await anyio.to_thread.run_sync(sign_in)
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    async def session() -> dict[str, object]:
        auth = OAuthClientProvider(
            server_url=server.url,
            client_metadata=OAuthClientMetadata(redirect_uris=[CALLBACK], scope=SEARCH),  # type: ignore[list-item]
            storage=storage,
            redirect_handler=redirect,
            callback_handler=callback,
        )
        http_client = httpx2.AsyncClient(auth=auth, timeout=httpx2.Timeout(30, read=300))
        async with http_client, Client(streamable_http_client(server.url, http_client=http_client)) as mcp:
            captured = await mcp.call_tool(CAPTURE, {"purpose_ref": "team-notes", "payload": {}})
        return {"error": captured.is_error, "content": json.dumps(captured.structured_content)}

    done = anyio.run(session)
    assert len(asked) == 1  # one new authorization, by the SDK itself
    assert f"scope={CAPTURE}+{SEARCH}" in asked[0] or f"scope={SEARCH}+{CAPTURE}" in asked[0], asked[0]
    assert storage.tokens is not None and set((storage.tokens.scope or "").split()) == {CAPTURE, SEARCH}
    assert "Unknown tool" not in str(done["content"])  # the capture reached the engine (its envelope judges it)
