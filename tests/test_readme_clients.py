"""Every client snippet of the README, read as its client reads it and launched: the stdio ones start
exactly their command (the home given as ENGRAM_HOME, the token and the installed command's path filled
in), the HTTP ones reach a running `serve --http` with their header."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from engram_memory.host.client_config import server_command
from engram_memory.host.settings import HostPaths
from tests.support.client_snippets import http_endpoint, stdio_launch, tools_and_purpose
from tests.support.homes import bind
from tests.support.http_agents import HttpAgent, HttpServer
from tests.support.payloads import PURPOSE
from tests.support.tokens import NODE_TOOLS

pytestmark = pytest.mark.stdio

README = Path(__file__).resolve().parents[1] / "README.md"
SNIPPET = re.compile(r"<!-- client: ([a-z-]+) (stdio|http) -->\n```[a-z]*\n(.*?)\n```", re.S)
EXPECTED = {
    ("claude-code", "stdio"), ("claude-code", "http"), ("claude-desktop", "stdio"), ("vscode", "stdio"),
    ("vscode", "http"), ("cursor", "stdio"), ("cursor", "http"),
}  # fmt: skip


def _snippets() -> dict[tuple[str, str], str]:
    return {(client, transport): text for client, transport, text in SNIPPET.findall(README.read_text("utf-8"))}


def _filled(text: str, token: str) -> str:
    return text.replace("<token>", token).replace("${input:engram-binding}", token)


def test_the_readme_has_a_snippet_for_every_client_and_transport() -> None:
    assert set(_snippets()) == EXPECTED


@pytest.mark.parametrize("client", sorted(client for client, transport in EXPECTED if transport == "stdio"))
def test_each_stdio_snippet_of_the_readme_starts_a_server_with_the_six_tools(
    sqlite_paths: HostPaths, client: str
) -> None:
    token = bind(sqlite_paths).token
    command, args, env = stdio_launch(client, _filled(_snippets()[client, "stdio"], token))
    assert Path(command).name == "engram-memory"  # the installed command; a user's path stands in the README
    assert env == {"ENGRAM_BINDING": token}
    tools, description = tools_and_purpose(server_command()[0], args, {**env, "ENGRAM_HOME": str(sqlite_paths.home)})
    assert len(tools) == 6 and f'"{PURPOSE}"' in description


def test_each_http_snippet_of_the_readme_reaches_serve_http(sqlite_paths: HostPaths, tmp_path: Path) -> None:
    token = bind(sqlite_paths).token
    with HttpServer(sqlite_paths.home, tmp_path / "serve.log") as server:
        for client in sorted(client for client, transport in EXPECTED if transport == "http"):
            url, headers = http_endpoint(client, _filled(_snippets()[client, "http"], token))
            assert url == "http://127.0.0.1:8765/mcp"
            with HttpAgent(server.url, None, headers=headers) as agent:  # the port the test server got
                assert len(agent.list_tools()) == 6, client


CLAUDE = NODE_TOOLS / "node_modules" / ".bin" / "claude"
QUIET = {"DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}


def test_the_claude_code_snippet_works_in_a_fresh_shell_once_installed_as_a_tool(tmp_path: Path) -> None:
    """`pipx install` and `uv tool install` (the README's way) put the command in a virtual environment of
    its own and link it into ~/.local/bin, which a login shell has on its PATH. That layout is made here
    with this installation's command (installing from the registry is not a test's business): a new HOME
    whose ~/.local/bin links to it, and a shell given nothing but that HOME and a PATH of ~/.local/bin and
    the system's folders. In it, exactly what the README says: init, bind, the Claude Code snippet; then
    Claude Code itself (tests/node) starts the server and reports it connected."""
    home = tmp_path / "person"
    tools = home / ".local" / "bin"
    tools.mkdir(parents=True)
    (tools / "engram-memory").symlink_to(server_command()[0])
    project = tmp_path / "project"
    project.mkdir()
    env = {"HOME": str(home), "PATH": f"{tools}:{CLAUDE.parent}:/usr/bin:/bin", **QUIET}

    def shell(line: str) -> str:
        done = subprocess.run(
            ["/bin/bash", "--noprofile", "--norc", "-c", line],
            env=env,
            cwd=project,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    shell("engram-memory init")
    token = shell(
        "engram-memory bind --tenant acme --workspace platform --principal alice@acme --agent claude-code"
        " --session laptop --purpose purpose:platform-notes --all-tools --expires-in 30d"
    ).strip()
    shell(_filled(_snippets()["claude-code", "stdio"], token))
    listed = shell("claude mcp list")
    assert "engram-memory: engram-memory serve - ✔ Connected" in listed, listed
