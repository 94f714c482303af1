"""One sign-in server per store for each test module (a server start costs about a second): a home with
access rules and enrolled people, served over HTTP on loopback with --public-url. Tests that change a
person use their own account."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram_memory.host.settings import HostPaths
from tests.support.homes import STORES, home_on
from tests.support.http_agents import HttpServer
from tests.support.sign_in import PEOPLE, RULES, Flow, enrolled, free_port


@pytest.fixture(scope="module", params=STORES)
def home(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostPaths]:
    store = str(request.param)
    with home_on(store, tmp_path_factory.mktemp(f"oauth-{store}") / "home", request) as paths:
        paths.access.write_text(RULES, encoding="utf-8")
        enrolled(paths, PEOPLE)
        yield paths


@pytest.fixture(scope="module")
def server(home: HostPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    port = free_port()
    log = tmp_path_factory.mktemp("oauth-log") / "serve.log"
    with HttpServer(home.home, log, "--port", str(port), "--public-url", f"http://127.0.0.1:{port}") as running:
        yield running


@pytest.fixture
def flow(server: HttpServer) -> Iterator[Flow]:
    opened = Flow(server)
    try:
        yield opened
    finally:
        opened.close()
