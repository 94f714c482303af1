"""Reading MCP client configurations the way their clients do, and launching what they name."""

from __future__ import annotations

import json
import shlex
from typing import Any

import anyio

from mcp import Client, StdioServerParameters


def stdio_launch(client: str, snippet: str) -> tuple[str, list[str], dict[str, str]]:
    """The command, arguments and environment the client would start, read from its snippet."""
    if client == "claude-code":
        words = shlex.split(snippet)
        assert words[:4] == ["claude", "mcp", "add", "engram-memory"] and words[4] == "--env"
        name, _, value = words[5].partition("=")
        command = words[words.index("--") + 1 :]
        return command[0], command[1:], {name: value}
    parsed = json.loads(snippet)
    server: dict[str, Any] = (parsed["servers"] if client == "vscode" else parsed["mcpServers"])["engram-memory"]
    if client == "vscode":
        assert server.pop("type") == "stdio"
    return server["command"], server["args"], server["env"]


def tools_and_purpose(command: str, args: list[str], env: dict[str, str]) -> tuple[set[str], str]:
    async def main() -> tuple[set[str], str]:
        async with Client(StdioServerParameters(command=command, args=args, env=env), read_timeout_seconds=60) as c:
            listed = await c.list_tools()
            return {tool.name for tool in listed.tools}, listed.tools[0].description or ""

    return anyio.run(main)


def http_endpoint(client: str, snippet: str) -> tuple[str, dict[str, str]]:
    if client == "claude-code":
        words = shlex.split(snippet)
        assert words[:6] == ["claude", "mcp", "add", "--transport", "http", "engram-memory"]
        name, _, value = words[words.index("--header") + 1].partition(": ")
        return words[6], {name: value}
    parsed = json.loads(snippet)
    server = (parsed["servers"] if client == "vscode" else parsed["mcpServers"])["engram-memory"]
    if client == "vscode":
        assert server["type"] == "http"
    return server["url"], server["headers"]
