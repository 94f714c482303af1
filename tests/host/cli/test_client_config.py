"""`bind --print-config CLIENT`: each snippet is parsed and exactly its command (or URL and header) is
launched with a real MCP client, which must see the six tools and the bound purpose_ref."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engram_memory.host.client_config import CLIENTS, DESKTOP_OVER_HTTP
from engram_memory.host.settings import HostPaths
from tests.host.clirun import assert_one_line_failure, cli
from tests.support.client_snippets import http_endpoint, stdio_launch, tools_and_purpose
from tests.support.http_agents import HttpAgent, HttpServer

pytestmark = pytest.mark.stdio

PURPOSE = "purpose:config-check"


def _print_config(paths: HostPaths, client: str, *extra: str) -> str:
    done = cli(
        "bind", "--tenant", "acme", "--workspace", "platform", "--principal", "alice", "--agent", client,
        "--session", "s-1", "--purpose", PURPOSE, "--all-tools", "--print-config", client, *extra,
        "--home", str(paths.home),
    )  # fmt: skip
    assert done.code == 0 and "Traceback" not in done.stderr, done
    assert "keep it out of version control" in done.stderr
    return done.stdout


@pytest.mark.parametrize("client", CLIENTS)
def test_each_stdio_snippet_launches_a_server_that_serves_the_binding(sqlite_paths: HostPaths, client: str) -> None:
    command, args, env = stdio_launch(client, _print_config(sqlite_paths, client))
    assert Path(command).is_absolute() and Path(command).exists()
    assert Path(args[args.index("--home") + 1]) == sqlite_paths.home.resolve()
    assert set(env) == {"ENGRAM_BINDING"}
    tools, description = tools_and_purpose(command, args, env)
    assert len(tools) == 6 and f'"{PURPOSE}"' in description


def test_each_http_snippet_reaches_a_running_server_with_its_header(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    with HttpServer(sqlite_paths.home, tmp_path / "serve.log") as server:
        for client in ("claude-code", "vscode", "cursor"):
            url, headers = http_endpoint(client, _print_config(sqlite_paths, client, "--http", server.url))
            assert url == server.url and headers["Authorization"].startswith("Bearer ")
            with HttpAgent(url, None, headers=headers) as agent:
                assert len(agent.list_tools()) == 6, client


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (("--print-config", "claude-desktop", "--http", "http://127.0.0.1:8765/mcp"), DESKTOP_OVER_HTTP),
        (("--print-config", "emacs"), "unknown client 'emacs'"),
        (("--http", "http://127.0.0.1:8765/mcp"), "--http goes with --print-config CLIENT"),
        (("--print-config", "cursor", "--json"), "choose one"),
    ],
)
def test_options_that_do_not_go_together_fail_in_one_line_and_issue_nothing(
    sqlite_paths: HostPaths, extra: tuple[str, ...], says: str
) -> None:
    done = cli(
        "bind", "--tenant", "acme", "--workspace", "platform", "--principal", "alice", "--agent", "a",
        "--session", "s-1", "--purpose", PURPOSE, "--all-tools", *extra, "--home", str(sqlite_paths.home),
    )  # fmt: skip
    assert says in assert_one_line_failure(done)
    listed = cli("bindings", "list", "--json", "--home", str(sqlite_paths.home))
    assert json.loads(listed.stdout) == []
