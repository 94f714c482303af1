"""A real MCP client (the SDK's) talking to the server `engram-memory serve` runs.

`StdioAgent` talks to a real `serve` process over stdio; `ServedAgent` to the same server, built the
way `serve` builds it, in this process through the SDK's in-memory transport, for the tests about what
the contract says rather than about the transport. Both are driven synchronously through an anyio
blocking portal, so one server can serve many tests. Every tool result is checked against SPEC §3 on
the way in: the text block holds the same JSON as `structuredContent`, and `isError == !ok`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Self

import mcp_types as types
from anyio.from_thread import start_blocking_portal
from mcp.server import Server
from mcp.shared.exceptions import MCPError

from engram_memory.engine.ports.store import Clock
from engram_memory.host.backends import store_backend
from engram_memory.host.compose import open_engine, verify_token
from engram_memory.host.serve.stdio_binding import StdioBinding
from engram_memory.host.settings import HostPaths
from engram_memory.mcp.server import build_server
from mcp import Client, StdioServerParameters

# The conformance suites check exact result sets, so their servers rank lexically unless a test asks for
# the default hybrid profile (semantic=True): with the model on, a search also returns the nearest
# memories of the scope, which no exact expectation can name in a shared home.
LEXICAL_ONLY = {"ENGRAM_EMBEDDING_MODEL": "off"}


class McpAgent:
    _client: Client
    _portal: Any
    _stack: ExitStack

    @property
    def protocol_version(self) -> str:
        return self._client.protocol_version

    @property
    def instructions(self) -> str | None:
        return self._client.instructions

    def list_tools(self) -> list[types.Tool]:
        return list(self._portal.call(self._client.list_tools).tools)

    def list_prompts(self) -> list[types.Prompt]:
        return list(self._portal.call(self._client.list_prompts).prompts)

    def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> types.GetPromptResult:
        """Raises mcp.shared.exceptions.MCPError for an unknown prompt or argument."""
        return self._portal.call(self._client.get_prompt, name, arguments)

    def raw_call(self, tool: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """Raises mcp.shared.exceptions.MCPError for protocol errors."""
        return self._portal.call(self._client.call_tool, tool, arguments)

    def call(self, tool: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """The envelope, after checking the SPEC §3 transport rules."""
        result = self.raw_call(tool, arguments)
        envelope = result.structured_content
        assert isinstance(envelope, dict)
        texts = [block for block in result.content if isinstance(block, types.TextContent)]
        assert len(texts) == 1 and len(result.content) == 1
        assert json.loads(texts[0].text) == envelope
        assert result.is_error == (not envelope["ok"])
        return envelope

    def value(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        envelope = self.call(tool, arguments)
        assert envelope["ok"], envelope
        value: dict[str, Any] = envelope["output"]["value"]
        return value

    def error_code(self, tool: str, arguments: dict[str, Any] | None) -> str:
        envelope = self.call(tool, arguments)
        assert not envelope["ok"], envelope
        code: str = envelope["error"]["code"]
        return code

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ServedHome:
    """The engines `serve` opens for a home (agent calls through the runtime role, the binding checked by
    the owner), opened once and shared by the servers of several bindings, as one process would."""

    def __init__(self, paths: HostPaths, *, semantic: bool = False, clock: Clock | None = None) -> None:
        self.paths = paths
        self._stack = ExitStack()
        try:
            self.owner = self._stack.enter_context(open_engine(paths, semantic=semantic, clock=clock))
            self.agents = self.owner
            if store_backend(paths).runtime_role:
                opened = open_engine(paths, runtime=True, semantic=semantic, clock=clock)
                self.agents = self._stack.enter_context(opened)
        except BaseException:
            self._stack.close()
            raise

    def server(self, token: str | None) -> Server[Any]:
        """The server `serve` builds for a stdio binding given as `token`."""
        source = StdioBinding(lambda given: verify_token(self.paths, given), self.owner.binding_unusable, token=token)
        return build_server(self.agents, lambda _ctx: source.binding())

    def close(self) -> None:
        self._stack.close()


class ServedAgent(McpAgent):
    """The SDK's client joined to the server `serve` builds, in this process (the SDK's in-memory
    transport). No handshake refusal and no housekeeping: those are the stdio transport's and the
    process's, which StdioAgent's tests show."""

    def __init__(self, served: ServedHome, token: str | None, *, mode: str = "auto") -> None:
        self._stack = ExitStack()
        try:
            self._portal = self._stack.enter_context(start_blocking_portal())
            self._client = self._stack.enter_context(
                self._portal.wrap_async_context_manager(
                    Client(served.server(token), mode=mode, read_timeout_seconds=60)
                )
            )
        except BaseException:
            self._stack.close()
            raise


class StdioAgent(McpAgent):
    def __init__(
        self,
        home: Path,
        token: str | None,
        *,
        mode: str = "auto",
        extra_env: dict[str, str] | None = None,
        semantic: bool = False,
    ) -> None:
        env = {**({} if semantic else LEXICAL_ONLY), **(extra_env or {})}
        if token is not None:
            env["ENGRAM_BINDING"] = token
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "engram_memory", "serve", "--home", str(home)], env=env
        )
        self._stack = ExitStack()
        self._portal = self._stack.enter_context(start_blocking_portal())
        try:
            self._client: Client = self._stack.enter_context(
                self._portal.wrap_async_context_manager(Client(params, mode=mode, read_timeout_seconds=60))
            )
        except BaseException:
            self._stack.close()
            raise


def refusal_message(connect: Callable[[], StdioAgent]) -> str:
    """Connects as an SDK client does (probe, then handshake) to a server that must refuse, and returns the
    refusal's message after checking it is the contract's -32603 (the SDK wraps it in task groups)."""
    try:
        connect().close()
    except BaseException as raised:
        errors = [error for error in _leaves(raised) if isinstance(error, MCPError)]
        assert len(errors) == 1 and errors[0].code == -32603, raised
        return errors[0].message
    raise AssertionError("the server accepted the connection")


def _leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from _leaves(inner)
    else:
        yield error
