"""Run the real `engram-memory` command in a subprocess, and a real MCP stdio session whose stderr is kept.

The environment is cleaned of every `ENGRAM_*` variable and of colour switches, so a test sees exactly
what it set; output is what a pipe receives (80 columns, no colour).
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from anyio.from_thread import start_blocking_portal
from mcp.client.stdio import stdio_client

from mcp import Client, StdioServerParameters
from tests.support.agents import StdioAgent

_DROPPED = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES", "CLICOLOR_FORCE")


@dataclass(frozen=True)
class Done:
    code: int
    stdout: str
    stderr: str

    @property
    def error_lines(self) -> list[str]:
        return self.stderr.splitlines()


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_") and k not in _DROPPED}
    env["COLUMNS"] = "80"
    env.update(extra or {})
    return env


def cli(*args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 60) -> Done:
    done = subprocess.run(
        [sys.executable, "-m", "engram_memory", *(str(a) for a in args)],
        capture_output=True,
        text=True,
        env=clean_env(env),
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        timeout=timeout,
        check=False,
    )
    return Done(done.returncode, done.stdout, done.stderr)


def assert_one_line_failure(done: Done) -> str:
    """A failure: non-zero exit, nothing on stdout, one line on stderr, no traceback. Returns the line."""
    assert "Traceback" not in done.stderr, done.stderr
    assert done.code != 0, done
    assert done.stdout == "", done
    assert len(done.error_lines) == 1, done.stderr
    assert done.stderr.endswith("\n")
    return done.error_lines[0]


class LoggedAgent(StdioAgent):
    """A StdioAgent (same SPEC §3 checks) whose server's stderr goes to a file, with free `serve` arguments."""

    def __init__(self, home: Path, stderr_file: Path, *serve_args: str, env: dict[str, str] | None = None) -> None:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "engram_memory", "serve", *serve_args, "--home", str(home)],
            env=dict(env or {}),
        )
        self._stack = ExitStack()
        errlog = self._stack.enter_context(stderr_file.open("w", encoding="utf-8"))
        self._portal = self._stack.enter_context(start_blocking_portal())
        try:
            self._client = self._stack.enter_context(
                self._portal.wrap_async_context_manager(
                    Client(stdio_client(params, errlog=errlog), mode="auto", read_timeout_seconds=60)
                )
            )
        except BaseException:
            self._stack.close()
            raise
