"""Driving the sign-in server as people and clients do: a browser following the sign-in and consent pages
(httpx, cookies kept), the official SDK's OAuth client with its token storage in memory, and the home's
rules and enrolled people the tests share."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import socket
import ssl
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import anyio
import httpx
import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from engram_memory.host.access.people import add_person, enrol
from engram_memory.host.compose import open_vault
from engram_memory.host.settings import HostPaths
from mcp import Client
from tests.host.clirun import cli
from tests.support.http_agents import HttpServer

PASSWORD = "correct horse battery staple"
RULES = """
[[rules]]
name = "contractors"
group = "contractors"
refuse = true

[[rules]]
name = "team"
email_domain = "acme.com"
tenant = "acme"
workspaces = ["team", "ops"]
grants = ["search", "get", "capture", "request_admission"]
purpose = "team-notes"
"""
PEOPLE = {"alice@acme.com": ["eng"], "carl@acme.com": ["contractors"], "dan@acme.com": ["eng"]}
CALLBACK = "http://127.0.0.1:9/callback"  # never reached: the browser stops at the redirect and hands it over


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def enrolled(paths: HostPaths, people: dict[str, list[str]]) -> None:
    """Accounts on the home, each enrolled with PASSWORD."""
    vault = open_vault(paths)
    try:
        store = vault.sign_in()
        for email, groups in people.items():
            enrolment = add_person(store, email, groups, now_ms=0, created_by="host:test", enrol_for_s=10**9)
            assert enrol(store, enrolment.secret, PASSWORD, now_ms=1) is not None
    finally:
        vault.close()


def signed_in_binding(paths: HostPaths, client_id: str) -> dict[str, object]:
    """The binding sign-in issued to this client (the server's `bindings list`)."""
    listed = json.loads(cli("bindings", "list", "--json", "--home", paths.home).stdout)
    found = [item for item in listed if item["issued_by"] == "sign-in" and item["agent_id"] == client_id]
    assert len(found) == 1, listed
    binding: dict[str, object] = found[0]
    return binding


def hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, html
    return found.group(1).replace("&amp;", "&")


class Browser:
    """What a person's browser does between the authorization URL and the client's redirect URI."""

    def __init__(self, base: str, verify: ssl.SSLContext | bool = True) -> None:
        self.base = base
        self.client = httpx.Client(base_url=base, follow_redirects=False, timeout=30, verify=verify)
        self.pages: list[httpx.Response] = []
        self.redirected_to = ""

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def get(self, url: str) -> httpx.Response:
        answer = self.client.get(urljoin(self.base, url))
        self.pages.append(answer)
        return answer

    def post(self, path: str, data: dict[str, str]) -> httpx.Response:
        answer = self.client.post(path, data=data)
        self.pages.append(answer)
        return answer

    def authorize(
        self, url: str, email: str, *, workspace: str = "team", decision: str = "allow", callback: str = CALLBACK
    ) -> dict[str, str]:
        """Signs in, consents, and returns the parameters the server redirects back to the client with."""
        sign_in = self.get(self.get(url).headers["location"])
        assert sign_in.status_code == 200, sign_in.text
        request = hidden(sign_in.text, "request")
        signed = self.post("/sign-in", {"request": request, "email": email, "password": PASSWORD})
        assert signed.status_code == 303, signed.text
        consent = self.get(signed.headers["location"])
        if consent.status_code != 200:
            return {"page": str(consent.status_code), "text": consent.text}
        form = {"request": request, "csrf": hidden(consent.text, "csrf"), "workspace": workspace, "decision": decision}
        answered = self.post("/consent", form)
        assert answered.status_code == 303, answered.text
        location = answered.headers["location"]
        assert location.startswith(callback)
        self.redirected_to = location
        return {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}


class Memory:
    """The SDK's token storage, kept in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def agent_session(
    server: HttpServer,
    email: str,
    storage: Memory,
    *,
    verify: ssl.SSLContext | bool = True,
    client_metadata_url: str | None = None,
) -> dict[str, object]:
    """The SDK's OAuth client connecting as a new client (registered, or known by `client_metadata_url`),
    the person signing in and consenting in a browser, then a tools list and one search."""
    base = server.url.removesuffix("/mcp")
    with Browser(base, verify) as browser:
        return await _signed_in_session(server, email, storage, browser, verify, client_metadata_url)


async def _signed_in_session(
    server: HttpServer,
    email: str,
    storage: Memory,
    browser: Browser,
    verify: ssl.SSLContext | bool,
    client_metadata_url: str | None,
) -> dict[str, object]:
    pending: list[str] = []

    async def redirect(url: str) -> None:
        pending.append(url)

    async def callback() -> AuthorizationCodeResult:
        answer = await anyio.to_thread.run_sync(lambda: browser.authorize(pending[-1], email))
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    auth = OAuthClientProvider(
        server_url=server.url,
        client_metadata=OAuthClientMetadata(redirect_uris=[CALLBACK], client_name="Test agent"),  # type: ignore[list-item]
        storage=storage,
        redirect_handler=redirect,
        callback_handler=callback,
        client_metadata_url=client_metadata_url,
    )
    async with httpx2.AsyncClient(auth=auth, verify=verify, timeout=httpx2.Timeout(30, read=300)) as http_client:
        transport = streamable_http_client(server.url, http_client=http_client)
        async with Client(transport, read_timeout_seconds=60) as client:
            tools = sorted(tool.name for tool in (await client.list_tools()).tools)
            found = await client.call_tool("engram_memory_search", {"query": "deploys", "purpose_ref": "team-notes"})
    return {"tools": tools, "search": found.structured_content, "pages": [page.status_code for page in browser.pages]}


LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    return verifier, challenge


class Flow:
    """A registered client driving the endpoints by hand (httpx), as an attacker or a careful test would."""

    def __init__(self, server: HttpServer) -> None:
        self.base = server.url.removesuffix("/mcp")
        self.mcp = server.url
        self.http = httpx.Client(base_url=self.base, follow_redirects=False, timeout=30)
        registered = self.http.post("/register", json={"redirect_uris": [CALLBACK], "client_name": "Attacker?"})
        assert registered.status_code == 201, registered.text
        self.client_id = registered.json()["client_id"]

    def close(self) -> None:
        self.http.close()

    def authorize_url(self, challenge: str | None, **extra: str) -> str:
        query = {"response_type": "code", "client_id": self.client_id, "redirect_uri": CALLBACK, "state": "s"}
        if challenge is not None:
            query.update(code_challenge=challenge, code_challenge_method="S256")
        query.update(extra)
        return "/authorize?" + urlencode(query)

    def code(self, challenge: str, email: str = "alice@acme.com") -> str:
        with Browser(self.base) as browser:
            answer = browser.authorize(self.authorize_url(challenge), email)
        assert answer["iss"] == self.base and answer["state"] == "s"
        return answer["code"]

    def token(self, **form: str) -> httpx.Response:
        return self.http.post("/token", data={"client_id": self.client_id, **form})

    def exchange(self, code: str, verifier: str, redirect_uri: str = CALLBACK) -> httpx.Response:
        return self.token(grant_type="authorization_code", code=code, code_verifier=verifier, redirect_uri=redirect_uri)

    def refresh(self, refresh_token: str) -> httpx.Response:
        return self.token(grant_type="refresh_token", refresh_token=refresh_token)

    def list_tools(self, access_token: str) -> httpx.Response:
        headers = {**MCP_HEADERS, "authorization": f"Bearer {access_token}"}
        return self.http.post("/mcp", json=LIST_TOOLS, headers=headers)
