"""The official MCP Inspector's CLI (`@modelcontextprotocol/inspector --cli`, Node 22 from tests/node) against
the server: over stdio with the binding in its environment, and over HTTP with the bearer header."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engram_memory.host.settings import HostPaths
from tests.support.homes import bind
from tests.support.http_agents import HttpServer
from tests.support.payloads import PURPOSE
from tests.support.tokens import NODE_TOOLS

pytestmark = pytest.mark.stdio

BIN = NODE_TOOLS / "node_modules" / ".bin"


def _inspector(*args: str) -> subprocess.CompletedProcess[str]:
    if not (BIN / "mcp-inspector").exists():
        raise AssertionError("tests/node is not installed: run `make test` (it runs npm ci --prefix tests/node)")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "CI": "1"}
    return subprocess.run(
        [str(BIN / "mcp-inspector"), "--cli", *args], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def _stdio(paths: HostPaths, token: str, *method: str) -> subprocess.CompletedProcess[str]:
    server = ["-e", f"ENGRAM_BINDING={token}", "-e", f"ENGRAM_HOME={paths.home}", "-e", "ENGRAM_EMBEDDING_MODEL=off"]
    return _inspector(*server, sys.executable, "-m", "engram_memory", "serve", *method)


def test_the_inspector_lists_and_calls_the_tools_over_stdio(sqlite_paths: HostPaths) -> None:
    token = bind(sqlite_paths).token
    listed = _stdio(sqlite_paths, token, "--method", "tools/list")
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)["tools"]) == 6
    called = _stdio(
        sqlite_paths, token, "--method", "tools/call", "--tool-name", "engram_memory_search",
        "--tool-arg", "query=release train", f"purpose_ref={PURPOSE}",
    )  # fmt: skip
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    envelope = json.loads(result["content"][0]["text"])
    assert envelope["ok"] is True and envelope["output"]["value"]["records"] == []
    assert result["structuredContent"] == envelope


def test_the_inspector_reaches_serve_http_with_the_header_and_is_refused_without(
    sqlite_paths: HostPaths, tmp_path: Path
) -> None:
    token = bind(sqlite_paths).token
    with HttpServer(sqlite_paths.home, tmp_path / "serve.log") as server:
        listed = _inspector(
            server.url, "--transport", "http", "--header", f"Authorization: Bearer {token}", "--method", "tools/list"
        )
        assert listed.returncode == 0, listed.stderr
        assert len(json.loads(listed.stdout)["tools"]) == 6
        refused = _inspector(server.url, "--transport", "http", "--method", "tools/list")
    assert refused.returncode != 0 and refused.stdout.strip() == ""
    assert "auth" in refused.stderr.lower() and "404" not in refused.stderr
