"""A console over a real home (either store), driven in process through Starlette's test client.

The browser tests (test_browser.py) drive the real `engram-memory console` process with Chromium; these
drive the same app without a browser, so every page and refusal is checked on both stores quickly.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from starlette.testclient import TestClient

from engram_memory.contract.tools import Tool
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Scope
from engram_memory.host.console.app import build_console
from engram_memory.host.console.context import Console
from engram_memory.host.console.session import ConsoleSessions
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from tests.support.homes import bind, engine_for
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key

BASE = "http://127.0.0.1:8765"
DECIDER = "host:console-test"
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def review_mode(paths: HostPaths) -> None:
    paths.policy.write_text(DEFAULT_POLICY_TOML.replace('mode = "auto"', 'mode = "review"'), encoding="utf-8")


@dataclass
class Site:
    paths: HostPaths
    engine: Engine
    sessions: ConsoleSessions
    client: TestClient
    agent: InProcessAgent

    def login(self) -> None:
        answer = self.client.get(f"/login?token={self.sessions.login_token}", follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/queue", answer.text

    def csrf(self, path: str = "/queue") -> str:
        page = self.client.get(path)
        assert page.status_code == 200, page.text
        found = _CSRF.search(page.text)
        assert found is not None, page.text
        return found.group(1)

    def post(self, path: str, form: dict[str, str], *, csrf: bool = True) -> httpx.Response:
        data = {**form, "csrf": self.csrf()} if csrf else form
        return self.client.post(path, data=data, follow_redirects=False)

    def agent_scope(self) -> Scope:
        return Scope(self.agent.binding.tenant, self.agent.binding.workspace)

    def waiting(self, text: str) -> str:
        """A candidate the agent asked admission for, left for a person (the home is in review mode)."""
        candidate_id = str(self.agent.capture(text)["candidate_id"])
        assert self.agent.admit(candidate_id)["status"] == "pending_adjudication"
        return candidate_id

    def remembered(self, text: str) -> str:
        """A current record of the agent's scope (accepted by the host, as review mode needs)."""
        record_id = self.engine.accept_candidate(self.waiting(text), decided_by=DECIDER).record_id
        assert record_id is not None
        return record_id

    def forget_request(self, record_id: str) -> dict[str, str]:
        """The agent's forget, held at the gate; the arguments, for its retry."""
        forget = {"record_id": record_id, "idempotency_key": unique_key("forget"), "reason_ref": "reason:cleanup"}
        assert self.agent.error_code(Tool.FORGET.value, forget) == "gate_failed"
        return forget


@pytest.fixture
def site(paths: HostPaths) -> Iterator[Site]:
    review_mode(paths)
    with engine_for(paths) as engine:
        sessions = ConsoleSessions()
        app = build_console(Console(engine, paths, DECIDER), sessions)
        with TestClient(app, base_url=BASE) as client:
            yield Site(paths, engine, sessions, client, InProcessAgent(engine, bind(paths).binding))


@pytest.fixture
def signed_in(site: Site) -> Site:
    site.login()
    return site
