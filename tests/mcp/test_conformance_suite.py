"""The official MCP conformance suite (`@modelcontextprotocol/conformance`, on Node 22 from tests/node) against
`serve --http`. The suite connects without an Authorization header, so it reaches the server through a
loopback proxy that adds the binding's bearer header and passes every other header through (a DNS-
rebinding probe's Host included). Every scenario either passes or is named in docs/conformance.md with
the reason it does not apply."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from engram_memory.host.settings import HostPaths
from tests.support.header_proxy import HeaderProxy
from tests.support.homes import bind
from tests.support.http_agents import HttpServer
from tests.support.tokens import NODE_TOOLS

pytestmark = pytest.mark.stdio

DOC = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
PASSING = {
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-polling",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
    "prompts-list",
}


def _suite() -> list[str]:
    """The pinned 0.1.16 by its own entry point: tests/node also holds a later release (`conformance-next`,
    for the authorization-server scenarios), and both name their command `conformance`."""
    node = NODE_TOOLS / "node_modules" / ".bin" / "node"
    suite = NODE_TOOLS / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not (node.exists() and suite.exists()):
        raise AssertionError("tests/node is not installed: run `make test` (it runs npm ci --prefix tests/node)")
    return [str(node), str(suite)]


def _documented() -> dict[str, str]:
    """The scenarios docs/conformance.md names as not applying, with their reasons."""
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| (.+?) \|$", DOC.read_text("utf-8"), re.M)
    return dict(rows)


def test_the_conformance_suite_passes_every_scenario_that_applies(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{NODE_TOOLS / 'node_modules' / '.bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    listed = subprocess.run([*_suite(), "list"], env=env, capture_output=True, text=True, check=True, timeout=120)
    server_part = listed.stdout.split("Client scenarios", 1)[0]
    scenarios = set(re.findall(r"^  - ([a-z0-9-]+) \[", server_part, re.M))
    assert scenarios >= PASSING
    documented = _documented()
    assert scenarios - PASSING == set(documented), "every scenario that does not pass is in docs/conformance.md"
    assert not PASSING & set(documented)

    token = bind(sqlite_paths).token
    results = tmp_path / "results"
    with (
        HttpServer(sqlite_paths.home, tmp_path / "serve.log") as server,
        HeaderProxy(server.url, {"Authorization": f"Bearer {token}"}) as proxy,
    ):
        subprocess.run(
            [*_suite(), "server", "--url", proxy.url, "--suite", "all", "-o", str(results)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,  # it exits non-zero while any scenario fails; the checks below judge
        )
    outcomes: dict[str, list[str]] = {}
    for checks in results.glob("server-*/checks.json"):
        scenario = re.sub(r"^server-(.+)-\d{4}-\d\d-\d\dT.*$", r"\1", checks.parent.name)
        outcomes[scenario] = [check["status"] for check in json.loads(checks.read_text("utf-8"))]
    assert set(outcomes) == scenarios
    for scenario in PASSING:
        assert "FAILURE" not in outcomes[scenario], (scenario, outcomes[scenario])
