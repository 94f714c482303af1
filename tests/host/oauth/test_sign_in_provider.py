"""Signing in through the team's OpenID Connect provider: a real provider (npm oidc-provider) on loopback,
its own login and consent pages driven as a browser does; the ID token's signature, nonce and state are
checked, its claims meet the access rules, and the client gets a token only for a person they admit."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import NamedTuple
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from engram_memory.host.settings import HostPaths
from tests.host.console.browser import chromium, screenshot
from tests.support.http_agents import HttpServer
from tests.support.processes import reap
from tests.support.sign_in import CALLBACK, MCP_HEADERS, RULES, free_port, pkce
from tests.support.tokens import NODE_TOOLS

PROVIDER_SECRET = "provider-client-secret-for-tests"
ACCOUNTS = {
    "alice": {"email": "alice@acme.com", "email_verified": True, "groups": ["eng"]},
    "carl": {"email": "carl@acme.com", "email_verified": True, "groups": ["contractors"]},
    "mallory": {"email": "mallory@acme.com", "email_verified": False, "groups": []},
    "erin": {"email": "erin@acme.com", "email_verified": True, "groups": ["eng"]},
    "frank": {"email": "frank@acme.com", "email_verified": True, "groups": ["eng"]},
}


class Site(NamedTuple):
    provider: str
    server: HttpServer
    accounts: Path  # the provider's accounts, read at every lookup

    def change_account(self, login: str, claims: dict[str, object] | None) -> None:
        accounts = json.loads(self.accounts.read_text("utf-8"))
        if claims is None:
            del accounts[login]
        else:
            accounts[login] = claims
        self.accounts.write_text(json.dumps(accounts), encoding="utf-8")


@pytest.fixture(scope="module")
def site(home: HostPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("oidc")
    node = NODE_TOOLS / "node_modules" / ".bin" / "node"
    if not node.exists():
        pytest.fail("tests/node is not installed: run `make test` (it runs npm ci --prefix tests/node)")
    port, provider_port = free_port(), free_port()
    public = f"http://127.0.0.1:{port}"
    provider = f"http://127.0.0.1:{provider_port}"
    accounts = folder / "accounts.json"
    accounts.write_text(json.dumps(ACCOUNTS), encoding="utf-8")
    config = {
        "port": provider_port,
        "client_id": "engram",
        "client_secret": PROVIDER_SECRET,
        "redirect_uri": public + "/sign-in/callback",
        "accounts_file": str(accounts),
    }
    log = (folder / "provider.log").open("w")
    process = subprocess.Popen(
        [str(node), str(NODE_TOOLS / "oidc-provider.mjs"), json.dumps(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=NODE_TOOLS,
    )
    try:
        deadline = time.monotonic() + 30
        while "listening" not in (folder / "provider.log").read_text():
            assert process.poll() is None and time.monotonic() < deadline, (folder / "provider.log").read_text()
            time.sleep(0.05)
        secret = folder / "client-secret"
        secret.write_text(PROVIDER_SECRET)
        secret.chmod(0o600)
        home.access.write_text(
            RULES
            + f'\n[identity_provider]\nname = "Acme SSO"\nissuer = "{provider}"\nclient_id = "engram"\n'
            + f'client_secret_file = "{secret}"\nscopes = ["openid", "email", "groups", "offline_access"]\n',
            encoding="utf-8",
        )
        with HttpServer(home.home, folder / "serve.log", "--port", str(port), "--public-url", public) as server:
            yield Site(provider, server, accounts)
    finally:
        reap(process)
        log.close()


def _form(html: str) -> tuple[str, dict[str, str]]:
    action = re.search(r'<form[^>]*action="([^"]+)"', html)
    assert action is not None, html
    fields = dict(re.findall(r'<input[^>]*name="([^"]+)"[^>]*value="([^"]*)"', html))
    return unescape(action.group(1)), {key: unescape(value) for key, value in fields.items()}


def _sign_in(browser: httpx.Client, server: HttpServer, login: str) -> tuple[httpx.Response, str, str]:
    """Our sign-in page, the provider's login and consent, back to our consent page: (the last page,
    the client id, the PKCE verifier)."""
    base = server.url.removesuffix("/mcp")
    registered = browser.post(base + "/register", json={"redirect_uris": [CALLBACK], "client_name": "Agent"}).json()
    verifier, challenge = pkce()
    query = {
        "response_type": "code",
        "client_id": registered["client_id"],
        "redirect_uri": CALLBACK,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "s1",
    }
    page = browser.get(urljoin(base, browser.get(base + "/authorize?" + urlencode(query)).headers["location"]))
    link = re.search(r'href="(/sign-in/provider\?[^"]+)"', page.text)
    assert link is not None and "Sign in with Acme SSO" in page.text, page.text
    answer = browser.get(base + unescape(link.group(1)))
    for _ in range(12):  # the provider's pages: login, then consent, then back to us
        while answer.status_code in (302, 303) and not answer.headers["location"].startswith(base + "/consent"):
            location = answer.headers["location"]
            answer = browser.get(urljoin(str(answer.url), location))
        if answer.status_code != 200 or str(answer.url).startswith(base):
            break
        action, fields = _form(answer.text)
        if 'name="login"' in answer.text:
            fields.update(login=login, password="any")
        answer = browser.post(urljoin(str(answer.url), action), data=fields)
    if answer.status_code in (302, 303):
        answer = browser.get(urljoin(base, answer.headers["location"]))
    return answer, registered["client_id"], verifier


def test_a_person_the_provider_vouches_for_gets_a_token_the_rules_decided(site: Site) -> None:
    server = site.server
    base = server.url.removesuffix("/mcp")
    with httpx.Client(follow_redirects=False, timeout=30) as browser:
        consent, client_id, verifier = _sign_in(browser, server, "alice")
        assert consent.status_code == 200 and "Signed in as <strong>alice@acme.com</strong>" in consent.text
        action, fields = _form(consent.text)
        allowed = browser.post(base + action, data={**fields, "decision": "allow"})
        code = parse_qs(urlsplit(allowed.headers["location"]).query)["code"][0]
        form = {"client_id": client_id, "grant_type": "authorization_code", "code": code}
        tokens = browser.post(base + "/token", data={**form, "code_verifier": verifier, "redirect_uri": CALLBACK})
        listed = browser.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={**MCP_HEADERS, "authorization": f"Bearer {tokens.json()['access_token']}"},
        )
    assert listed.status_code == 200
    assert len(listed.json()["result"]["tools"]) == 4


@pytest.mark.parametrize(
    ("login", "words"), [("carl", "rule &#39;contractors&#39; refuses"), ("mallory", "no access rule admits")]
)
def test_a_person_the_rules_do_not_admit_is_told_why(site: Site, login: str, words: str) -> None:
    server = site.server
    with httpx.Client(follow_redirects=False, timeout=30) as browser:
        consent, _, _ = _sign_in(browser, server, login)
    assert consent.status_code == 403 and words in consent.text


def test_a_callback_that_was_not_started_here_signs_nobody_in(site: Site) -> None:
    server = site.server
    base = server.url.removesuffix("/mcp")
    forged = httpx.get(base + "/sign-in/callback?code=stolen&state=guess", timeout=30)
    assert forged.status_code == 400 and "not started here" in forged.text
    assert "set-cookie" not in forged.headers


def test_a_person_signs_in_through_the_provider_in_a_real_browser(site: Site) -> None:
    """Headless Chromium: our sign-in page, the provider's login and consent, our consent; the client then
    exchanges the code it was sent."""
    server = site.server
    base = server.url.removesuffix("/mcp")
    with httpx.Client(timeout=30) as http:
        client_id = http.post(base + "/register", json={"redirect_uris": [CALLBACK], "client_name": "Agent"}).json()[
            "client_id"
        ]
        verifier, challenge = pkce()
        query = {
            "response_type": "code",
            "client_id": client_id,
            "redirect_uri": CALLBACK,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "chromium",
        }
        with chromium() as driver:
            wait = WebDriverWait(driver, 30)
            driver.get(base + "/authorize?" + urlencode(query))
            wait.until(lambda d: "Sign in with Acme SSO" in d.page_source)
            driver.find_element(By.LINK_TEXT, "Sign in with Acme SSO").click()
            wait.until(lambda d: d.find_elements(By.NAME, "login"))
            driver.find_element(By.NAME, "login").send_keys("alice")
            driver.find_element(By.NAME, "password").send_keys("any")
            driver.find_element(By.CSS_SELECTOR, "form button[type=submit], form [type=submit]").click()
            wait.until(lambda d: "Allow access?" in d.title or d.find_elements(By.CSS_SELECTOR, "form [type=submit]"))
            if "Allow access?" not in driver.title:  # the provider's own consent
                driver.find_element(By.CSS_SELECTOR, "form [type=submit]").click()
                wait.until(lambda d: "Allow access?" in d.title)
            assert "Signed in as alice@acme.com" in driver.find_element(By.TAG_NAME, "body").text
            screenshot(driver, "sign-in-consent")
            driver.find_element(By.CSS_SELECTOR, "button[value=allow]").click()
            wait.until(lambda d: d.current_url.startswith(CALLBACK))
            answered = parse_qs(urlsplit(driver.current_url).query)
        assert answered["state"] == ["chromium"] and answered["iss"] == [base]
        form = {"client_id": client_id, "grant_type": "authorization_code", "code": answered["code"][0]}
        tokens = http.post(base + "/token", data={**form, "code_verifier": verifier, "redirect_uri": CALLBACK})
        listed = http.post(
            server.url,
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={**MCP_HEADERS, "authorization": f"Bearer {tokens.json()['access_token']}"},
        )
    assert listed.status_code == 200 and len(listed.json()["result"]["tools"]) == 4


def _signed_in_tokens(server: HttpServer, login: str) -> tuple[str, dict[str, str]]:
    """A client's tokens after `login` signed in through the provider and allowed it: (client id, tokens)."""
    base = server.url.removesuffix("/mcp")
    with httpx.Client(follow_redirects=False, timeout=30) as browser:
        consent, client_id, verifier = _sign_in(browser, server, login)
        assert consent.status_code == 200, consent.text
        action, fields = _form(consent.text)
        allowed = browser.post(base + action, data={**fields, "decision": "allow"})
        code = parse_qs(urlsplit(allowed.headers["location"]).query)["code"][0]
        form = {"client_id": client_id, "grant_type": "authorization_code", "code": code}
        tokens = browser.post(base + "/token", data={**form, "code_verifier": verifier, "redirect_uri": CALLBACK})
    assert tokens.status_code == 200, tokens.text
    return client_id, tokens.json()


def _refreshed(server: HttpServer, client_id: str, refresh_token: str) -> httpx.Response:
    form = {"client_id": client_id, "grant_type": "refresh_token", "refresh_token": refresh_token}
    return httpx.post(server.url.removesuffix("/mcp") + "/token", data=form, timeout=30)


def _listed(server: HttpServer, access_token: str) -> int:
    answer = httpx.post(
        server.url,
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**MCP_HEADERS, "authorization": f"Bearer {access_token}"},
        timeout=30,
    )
    return answer.status_code


def test_a_group_removed_at_the_provider_ends_access_at_the_next_refresh(site: Site) -> None:
    client_id, tokens = _signed_in_tokens(site.server, "erin")
    assert "refresh_token" in tokens
    again = _refreshed(site.server, client_id, tokens["refresh_token"])
    assert again.status_code == 200, again.text  # the provider was asked, and still vouches for erin
    assert _listed(site.server, again.json()["access_token"]) == 200
    site.change_account("erin", {**ACCOUNTS["erin"], "groups": ["contractors"]})
    refused = _refreshed(site.server, client_id, again.json()["refresh_token"])
    assert refused.status_code == 400
    assert refused.json()["error"] == "invalid_grant"
    assert "rule 'contractors' refuses erin@acme.com" in refused.json()["error_description"]
    assert _listed(site.server, again.json()["access_token"]) == 401  # the grant's live token went with it


def test_a_person_removed_at_the_provider_loses_the_grant_at_the_next_refresh(site: Site) -> None:
    client_id, tokens = _signed_in_tokens(site.server, "frank")
    site.change_account("frank", None)
    refused = _refreshed(site.server, client_id, tokens["refresh_token"])
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"
    assert "Acme SSO no longer signs in frank@acme.com" in refused.json()["error_description"]
    assert _listed(site.server, tokens["access_token"]) == 401
    site.change_account("frank", ACCOUNTS["frank"])  # back at the provider: the old grant stays ended
    assert _refreshed(site.server, client_id, tokens["refresh_token"]).status_code == 400
