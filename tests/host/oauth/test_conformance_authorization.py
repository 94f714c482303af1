"""The official MCP conformance suite's authorization-server scenarios (`conformance authorization`, first
shipped in 0.2.0-alpha; tests/node pins it as `conformance-next`) against the sign-in server. The suite
prints the authorization URL a person would open and waits on its own loopback callback; the test signs in
and consents as that person and hands the redirect to the suite, as the browser would."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.support.http_agents import HttpServer
from tests.support.sign_in import Browser, free_port
from tests.support.tokens import NODE_TOOLS

SCENARIOS = {"authorization-server-metadata-endpoint", "authorization-code-grant"}


def _suite() -> list[str]:
    node = NODE_TOOLS / "node_modules" / ".bin" / "node"
    suite = NODE_TOOLS / "node_modules" / "conformance-next" / "dist" / "index.js"
    if not (node.exists() and suite.exists()):
        pytest.fail("tests/node is not installed: run `make test` (it runs npm ci --prefix tests/node)")
    return [str(node), str(suite)]


def _authorization_url(suite: subprocess.Popen[str], endpoint: str, deadline_s: float) -> str:
    """The URL the suite asks a person to open, read from its output as it runs.

    Lines are read on a thread of their own: waiting on the pipe with select() misses lines the text
    stream has already buffered (the URL arrived with the line before it, and select() then waited out
    the deadline)."""
    assert suite.stdout is not None
    stdout = suite.stdout
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in stdout], daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + deadline_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=min(left, 1.0))
        except queue.Empty:
            if suite.poll() is not None and lines.empty():
                break
            continue
        seen.append(line)
        if line.startswith(endpoint + "?"):
            return line.strip()
    raise AssertionError("the suite printed no authorization URL:\n" + "".join(seen))


def test_the_authorization_scenarios_of_the_official_suite_pass(server: HttpServer, tmp_path: Path) -> None:
    issuer = server.url.removesuffix("/mcp")
    metadata = httpx.get(f"{issuer}/.well-known/oauth-authorization-server", timeout=30).json()
    assert metadata["issuer"] == issuer
    port = free_port()
    callback = f"http://127.0.0.1:{port}/callback"
    client = httpx.post(
        f"{issuer}/register", json={"redirect_uris": [callback], "client_name": "Conformance"}, timeout=30
    )
    assert client.status_code == 201, client.text
    results = tmp_path / "results"
    command = [*_suite(), "authorization", "--url", issuer, "--client-id", client.json()["client_id"]]
    command += ["--resource", server.url, "--port", str(port), "-o", str(results)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as suite:
        try:
            url = _authorization_url(suite, metadata["authorization_endpoint"], deadline_s=120)
            with Browser(issuer) as browser:
                answer = browser.authorize(url, "alice@acme.com", callback=callback)
                assert answer["iss"] == issuer
                handed = httpx.get(browser.redirected_to, timeout=30)
                assert handed.status_code == 200, handed.text
            suite.wait(timeout=120)
        finally:
            suite.kill()
    outcomes: dict[str, list[dict[str, object]]] = {}
    for checks in results.glob("*/checks.json"):
        for check in json.loads(checks.read_text("utf-8")):
            outcomes.setdefault(str(check["id"]), []).append(check)
    assert {"authorization-server-metadata", "authorization-server-metadata-cimd", "authorization-code-grant"} <= set(
        outcomes
    ), sorted(outcomes)
    for identifier, found in outcomes.items():
        assert all(check["status"] == "SUCCESS" for check in found), (identifier, found)
