"""Claude Code (npm `@anthropic-ai/claude-code`, pinned in tests/node) connecting to the sign-in server as
a person would: `claude mcp add --transport http` with no header, `claude mcp login` in a terminal (a
pseudo-terminal here; it refuses to sign in without one), the authorization URL it opens taken from the
`BROWSER` it runs, the sign-in and consent done in headless Chromium, whose last redirect reaches Claude
Code's own callback listener; then `claude mcp list` checks the server's health.

Claude Code names itself by its client ID metadata document on claude.ai. This machine cannot reach it,
so the server cannot read it and the sign-in stops at the authorization page: the first test shows that
far and what the person is told. The second takes the way the README gives for a server that cannot
reach the client's document: a client the host registers (`access add-client`), given to `claude mcp add
--client-id --callback-port`.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from engram_memory.host.settings import HostPaths
from tests.host.clirun import cli
from tests.host.console.browser import chromium, screenshot
from tests.support.http_agents import HttpServer
from tests.support.processes import reap
from tests.support.sign_in import PASSWORD, free_port, signed_in_binding
from tests.support.tokens import NODE_TOOLS

CLAUDE = NODE_TOOLS / "node_modules" / ".bin" / "claude"
QUIET = {"DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


@dataclass
class ClaudeCode:
    """Claude Code with a home and project folder of its own; `opened` is where its BROWSER writes."""

    folder: Path
    opened: Path = field(init=False)

    def __post_init__(self) -> None:
        if not CLAUDE.exists():
            pytest.fail("tests/node is not installed: run `make test` (it runs npm ci --prefix tests/node)")
        (self.folder / "home").mkdir(parents=True)
        self.opened = self.folder / "opened.txt"
        browser = self.folder / "browser.sh"
        browser.write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> "{self.opened}"\n', encoding="utf-8")
        browser.chmod(0o700)

    @property
    def env(self) -> dict[str, str]:
        home = str(self.folder / "home")
        return {"PATH": os.environ["PATH"], "HOME": home, "BROWSER": str(self.folder / "browser.sh"), **QUIET}

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [str(CLAUDE), *args],
            check=False,
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout + done.stderr

    def login(self, name: str) -> Login:
        return Login(self, name)

    def opened_url(self, deadline_s: float = 60) -> str:
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            if self.opened.exists() and self.opened.read_text("utf-8").strip():
                return self.opened.read_text("utf-8").split()[-1]
            time.sleep(0.1)
        raise AssertionError("Claude Code opened no authorization URL")


class Login:
    """`claude mcp login NAME` on a pseudo-terminal, its output read as it runs."""

    def __init__(self, claude: ClaudeCode, name: str) -> None:
        self._claude = claude
        self._name = name
        self.output = b""

    def __enter__(self) -> Login:
        master, terminal = pty.openpty()
        self._master = master
        self.process = subprocess.Popen(
            [str(CLAUDE), "mcp", "login", self._name],
            stdin=terminal,
            stdout=terminal,
            stderr=terminal,
            cwd=self._claude.folder,
            env={**self._claude.env, "TERM": "dumb"},
        )
        os.close(terminal)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self._master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(self._master, 4096)
                except OSError:
                    return
                if not chunk:
                    return
                self.output += chunk
            elif self.process.poll() is not None:
                return

    def wait(self, timeout_s: float = 60) -> int:
        code = self.process.wait(timeout=timeout_s)
        self._reader.join(timeout=5)
        return code

    @property
    def text(self) -> str:
        return self.output.decode(errors="replace")

    def __exit__(self, *exc: object) -> None:
        reap(self.process)
        os.close(self._master)


@pytest.fixture
def claude(tmp_path: Path) -> Iterator[ClaudeCode]:
    yield ClaudeCode(tmp_path / "claude")


def test_claude_code_added_without_a_header_reaches_the_authorization_page(
    server: HttpServer, claude: ClaudeCode
) -> None:
    claude.run("mcp", "add", "--transport", "http", "engram", server.url)
    assert "! Needs authentication" in claude.run("mcp", "list")
    base = server.url.removesuffix("/mcp")
    with claude.login("engram") as login:
        url = claude.opened_url()
        assert url.startswith(base + "/authorize?")
        asked = parse_qs(urlsplit(url).query)
        assert asked["code_challenge_method"] == ["S256"] and asked["resource"] == [server.url]
        page = httpx.get(url, timeout=30)
        # Claude Code's metadata document is on claude.ai, which this machine cannot reach.
        assert asked["client_id"] == ["https://claude.ai/oauth/claude-code-client-metadata"]
        assert page.status_code == 400
        assert "Cannot sign in to this app" in page.text and "claude.ai/oauth/claude-code-client-metadata" in page.text
        assert "--client-id ID --callback-port PORT" in page.text
        assert login.process.poll() is None  # still waiting for the person, as it would


def test_claude_code_signs_in_through_chromium_and_is_connected(
    home: HostPaths, server: HttpServer, claude: ClaudeCode
) -> None:
    port = free_port()
    callback = f"http://localhost:{port}/callback"
    added = cli("access", "add-client", "Claude Code", "--redirect-uri", callback, "--home", home.home)
    assert added.code == 0, added
    client_id = added.stdout.strip()
    claude.run(
        "mcp",
        "add",
        "--transport",
        "http",
        "--client-id",
        client_id,
        "--callback-port",
        str(port),
        "engram",
        server.url,
    )
    with claude.login("engram") as login, chromium() as driver:
        wait = WebDriverWait(driver, 30)
        driver.get(claude.opened_url())
        wait.until(lambda d: d.find_elements(By.NAME, "email"))
        driver.find_element(By.NAME, "email").send_keys("dan@acme.com")
        driver.find_element(By.NAME, "password").send_keys(PASSWORD)
        driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        wait.until(lambda d: "Allow access?" in d.title)
        assert "Claude Code" in driver.find_element(By.TAG_NAME, "body").text
        screenshot(driver, "claude-code-consent")
        driver.find_element(By.CSS_SELECTOR, "button[value=allow]").click()
        wait.until(lambda d: d.current_url.startswith(callback))
        assert login.wait() == 0, login.text
    assert 'Authenticated with "engram"' in login.text
    listed = claude.run("mcp", "list")
    assert f"engram: {server.url} (HTTP) - ✔ Connected" in listed, listed
    binding = signed_in_binding(home, client_id)
    assert (binding["tenant"], binding["workspace"], binding["principal"]) == ("acme", "team", "dan@acme.com")
    assert binding["purpose_ref"] == "team-notes"
    # Claude Code asked for all six tools; the rules give four.
    tools = {"engram_memory_search", "engram_memory_get", "engram_memory_capture", "engram_memory_request_admission"}
    assert isinstance(binding["grants"], list) and set(binding["grants"]) == tools
