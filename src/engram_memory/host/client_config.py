"""Ready-to-paste MCP client configurations for a binding: Claude Desktop, Claude Code, VS Code, Cursor.

Each names the command by absolute path (Claude Desktop starts servers without the user's shell PATH)
and the home by absolute path, so the snippet works wherever it is pasted; over HTTP it names the URL
and the bearer header instead.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from engram_memory.host.language.catalogue import N_, _

CLIENTS = ("claude-desktop", "claude-code", "vscode", "cursor")
SERVER_NAME = "engram-memory"


DESKTOP_OVER_HTTP = N_(
    "Claude Desktop's config file starts local servers only: use the stdio snippet, or add the URL as a "
    "custom connector in its settings"
)


def check_request(client: str | None, http_url: str | None, as_json: bool) -> str | None:
    """Why `bind`'s output options do not go together, or None."""
    if client is not None and client not in CLIENTS:
        return _("unknown client '{client}' (one of: {choices})").format(client=client, choices=", ".join(CLIENTS))
    if http_url is not None and client is None:
        return _("--http goes with --print-config CLIENT")
    if client is not None and as_json:
        return _("--print-config and --json print different things: choose one")
    if client == "claude-desktop" and http_url is not None:
        return _(DESKTOP_OVER_HTTP)
    return None


class ConfigError(ValueError):
    """The client cannot be configured that way; the message says why in one line."""


def server_command() -> list[str]:
    """This installation's command, absolute: the `engram-memory` script beside the running Python, or
    that Python running the package."""
    script = Path(sys.executable).parent / "engram-memory"
    if script.is_file():
        return [str(script)]
    return [str(Path(sys.executable)), "-m", "engram_memory"]


def client_config(client: str, token: str, home: Path, *, http_url: str | None = None) -> str:
    """The snippet for `client`: JSON for the files, a shell command line for Claude Code."""
    if client not in CLIENTS:
        raise ConfigError(
            _("unknown client '{client}' (one of: {choices})").format(client=client, choices=", ".join(CLIENTS))
        )
    if http_url is not None:
        return _http_config(client, token, http_url)
    command = [*server_command(), "serve", "--home", str(home.resolve())]
    env = {"ENGRAM_BINDING": token}
    if client == "claude-code":
        return shlex.join(["claude", "mcp", "add", SERVER_NAME, "--env", f"ENGRAM_BINDING={token}", "--", *command])
    server: dict[str, object] = {"command": command[0], "args": command[1:], "env": env}
    if client == "vscode":
        return _json({"servers": {SERVER_NAME: {"type": "stdio", **server}}})
    return _json({"mcpServers": {SERVER_NAME: server}})


def _http_config(client: str, token: str, url: str) -> str:
    header = f"Bearer {token}"
    if client == "claude-desktop":
        raise ConfigError(_(DESKTOP_OVER_HTTP))
    if client == "claude-code":
        return shlex.join(
            ["claude", "mcp", "add", "--transport", "http", SERVER_NAME, url, "--header", f"Authorization: {header}"]
        )
    if client == "vscode":
        return _json({"servers": {SERVER_NAME: {"type": "http", "url": url, "headers": {"Authorization": header}}}})
    return _json({"mcpServers": {SERVER_NAME: {"url": url, "headers": {"Authorization": header}}}})


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
