"""The HTTP twin of `agents.StdioAgent`: the SDK's own client over streamable HTTP to `serve --http` processes.

`HttpServer` starts a real `engram-memory serve --http --port 0` and reads the address it announces on
stderr; `HttpAgent` is the SDK client with an `Authorization: Bearer` header, driven synchronously
through a blocking portal, with the same SPEC §3 checks on every tool result as the stdio agent.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import IO

from anyio.from_thread import start_blocking_portal
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from mcp import Client
from tests.support.agents import LEXICAL_ONLY, McpAgent

_ANNOUNCED = re.compile(r"serving MCP over streamable HTTP at (https?://\S+)")
START_TIMEOUT_S = 30.0


def server_env(*, semantic: bool = False) -> dict[str, str]:
    """The test's environment without any ENGRAM_* variable, so the server sees only its flags; lexical
    ranking unless `semantic` (see tests/support/agents.py LEXICAL_ONLY)."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("ENGRAM_")}
    return env if semantic else {**env, **LEXICAL_ONLY}


class HttpServer:
    """One `serve --http` subprocess on a home; its stderr goes to `log_file` (a pipe could fill and stall it)."""

    def __init__(
        self,
        home: Path,
        log_file: Path,
        *serve_args: str,
        semantic: bool = False,
        env: dict[str, str] | None = None,
    ) -> None:
        self.log_file = log_file
        self._log: IO[str] = log_file.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engram_memory", "serve", "--http", "--port", "0", *serve_args, "--home", str(home)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            env={**server_env(semantic=semantic), **(env or {})},
        )
        try:
            self.url = self._announced_url()
        except BaseException:
            self.stop()
            raise
        self.port = int(self.url.rsplit(":", 1)[1].split("/", 1)[0])

    def _announced_url(self) -> str:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            found = _ANNOUNCED.search(self.log_file.read_text(encoding="utf-8"))
            if found:
                return found.group(1)
            if self.process.poll() is not None:
                raise RuntimeError(f"serve --http exited with {self.process.returncode}: {self.stderr()}")
            time.sleep(0.05)
        raise RuntimeError(f"serve --http did not announce its address: {self.stderr()}")

    def stderr(self) -> str:
        return self.log_file.read_text(encoding="utf-8")

    def stop(self) -> int:
        """SIGTERM (a graceful shutdown), then SIGKILL if it hangs; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        with suppress(OSError):
            self._log.close()
        return self.process.returncode

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def bearer(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


class HttpAgent(McpAgent):
    """The agent's interface and checks StdioAgent has (McpAgent), over streamable HTTP with one bearer
    token on every request.

    `mode` is the protocol era: 'legacy' (initialize handshake) or 'auto' (the 2026-07-28 modern era).
    Connecting raises mcp.shared.exceptions.MCPError when the server refuses the token.
    """

    def __init__(
        self, url: str, token: str | None, *, mode: str = "auto", headers: dict[str, str] | None = None
    ) -> None:
        self.url = url
        self._stack = ExitStack()
        self._portal = self._stack.enter_context(start_blocking_portal())
        try:
            http_client = create_mcp_http_client(headers={**bearer(token), **(headers or {})})
            self._stack.enter_context(self._portal.wrap_async_context_manager(http_client))
            transport = streamable_http_client(url, http_client=http_client)
            self._client = self._stack.enter_context(
                self._portal.wrap_async_context_manager(Client(transport, mode=mode, read_timeout_seconds=60))
            )
        except BaseException:
            self._stack.close()
            raise

    def __enter__(self) -> HttpAgent:
        return self
