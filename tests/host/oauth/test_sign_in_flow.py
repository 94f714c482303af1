"""Team sign-in end to end: `serve --http --public-url` as the authorization server of its own endpoint, the
official SDK's OAuth client registering itself (RFC 7591), a person signing in with an account on this host
and consenting in a browser (httpx following the pages as a browser does), then calling a tool with the
token whose binding the access rules decided."""

from __future__ import annotations

import json
import re
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import anyio
import httpx
import httpx2
import pytest
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from engram_memory.host.access.people import add_person, enrol
from engram_memory.host.compose import open_vault
from engram_memory.host.settings import HostPaths
from mcp import Client
from tests.host.clirun import cli
from tests.support.http_agents import HttpServer
from tests.support.payloads import PURPOSE

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
CALLBACK = "http://127.0.0.1:9/callback"  # never reached: the browser stops at the redirect and hands it over


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _person(paths: HostPaths, email: str, groups: list[str]) -> None:
    vault = open_vault(paths)
    try:
        store = vault.sign_in()
        enrolment = add_person(store, email, groups, now_ms=0, created_by="host:test", enrol_for_s=10**9)
        assert enrol(store, enrolment.secret, PASSWORD, now_ms=1) is not None
    finally:
        vault.close()


@pytest.fixture
def site(paths: HostPaths, tmp_path: Path) -> Iterator[tuple[HostPaths, HttpServer]]:
    paths.access.write_text(RULES, encoding="utf-8")
    _person(paths, "alice@acme.com", ["eng"])
    _person(paths, "carl@acme.com", ["contractors"])
    port = _free_port()
    public = f"http://127.0.0.1:{port}"
    with HttpServer(paths.home, tmp_path / "serve.log", "--port", str(port), "--public-url", public) as server:
        yield paths, server


def _hidden(html: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert found is not None, html
    return found.group(1).replace("&amp;", "&")


class Browser:
    """What a person's browser does between the authorization URL and the client's redirect URI."""

    def __init__(self, base: str, verify: ssl.SSLContext | bool = True) -> None:
        self.base = base
        self.client = httpx.Client(base_url=base, follow_redirects=False, timeout=30, verify=verify)
        self.pages: list[httpx.Response] = []

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

    def authorize(self, url: str, email: str, *, workspace: str = "team", decision: str = "allow") -> dict[str, str]:
        """Signs in, consents, and returns the parameters the server redirects back to the client with."""
        sign_in = self.get(self.get(url).headers["location"])
        assert sign_in.status_code == 200, sign_in.text
        request = _hidden(sign_in.text, "request")
        signed = self.post("/sign-in", {"request": request, "email": email, "password": PASSWORD})
        assert signed.status_code == 303, signed.text
        consent = self.get(signed.headers["location"])
        if consent.status_code != 200:
            return {"page": str(consent.status_code), "text": consent.text}
        form = {"request": request, "csrf": _hidden(consent.text, "csrf"), "workspace": workspace, "decision": decision}
        answered = self.post("/consent", form)
        assert answered.status_code == 303, answered.text
        location = answered.headers["location"]
        assert location.startswith(CALLBACK)
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


def test_the_sdk_client_registers_a_person_signs_in_and_the_token_carries_what_the_rules_decided(
    site: tuple[HostPaths, HttpServer],
) -> None:
    paths, server = site
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
    listed = json.loads(cli("bindings", "list", "--json", "--home", paths.home).stdout)
    (binding,) = [item for item in listed if item["issued_by"] == "sign-in"]
    assert (binding["tenant"], binding["workspace"], binding["principal"]) == ("acme", "team", "alice@acme.com")
    assert binding["agent_id"] == storage.client.client_id
    assert binding["session"].startswith("grant_") and binding["purpose_ref"] == "team-notes"
    assert binding["grants"] == session["tools"]
    assert PURPOSE != "team-notes"  # the client never chose the purpose: the rules did


def test_a_person_the_rules_refuse_sees_why_and_gets_no_code(site: tuple[HostPaths, HttpServer]) -> None:
    _, server = site
    with Browser(server.url.removesuffix("/mcp")) as browser:
        _refused(browser)


def _refused(browser: Browser) -> None:
    registered = browser.client.post("/register", json={"redirect_uris": [CALLBACK], "client_name": "X"}).json()
    url = (
        f"/authorize?response_type=code&client_id={registered['client_id']}&redirect_uri={CALLBACK}"
        "&code_challenge=E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM&code_challenge_method=S256&state=s1"
    )
    answer = browser.authorize(url, "carl@acme.com")
    assert answer["page"] == "403"
    assert "rule &#39;contractors&#39; refuses carl@acme.com" in answer["text"]


def test_every_page_forbids_framing_and_caching(site: tuple[HostPaths, HttpServer]) -> None:
    _, server = site
    with Browser(server.url.removesuffix("/mcp")) as browser:
        page = browser.get("/sign-in?request=forged")
    assert page.status_code == 400
    assert page.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"
