"""Run the real `engram-memory` command, and a real MCP stdio session whose stderr is kept.

`cli()` runs the command's own entry point (`engram_memory.host.cli.app.main`) inside the test process,
as a subprocess would see it: argv, a cleaned environment, the working folder, an empty stdin, stdout
and stderr captured as bytes and read back the way `subprocess.run(text=True)` reads a pipe, the exit
code from `SystemExit`, and an uncaught exception printed as the interpreter would (a traceback on
stderr, exit 1). `serve --http` and `demo` (long-running, or reading process-wide state such as the
temp folder) always run in a real subprocess, and so does `cli_process()`, which the tests that pin what
only a real process shows use: one-line failures with no traceback, stdout purity, exit codes.

The environment is cleaned of every `ENGRAM_*` variable and of colour switches, so a test sees exactly
what it set; output is what a pipe receives (80 columns, no colour).
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from anyio.from_thread import start_blocking_portal
from mcp.client.stdio import stdio_client

from mcp import Client, StdioServerParameters
from tests.support.agents import StdioAgent, refusal_message

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


def _needs_a_process(argv: list[str]) -> bool:
    """`serve --http` runs until it is signalled; `demo` starts servers of its own in a temp folder named
    by TMPDIR (which `tempfile` reads once per process). `serve` over stdio reads its (empty) stdin to
    the end and stops, so it runs in process."""
    return bool(argv) and (argv[0] == "demo" or (argv[0] == "serve" and "--http" in argv))


def cli(
    *args: str | Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
    stdin: str = "",
) -> Done:
    """The command run as `engram-memory ARGS` would run it: in this process unless it must be a real one."""
    argv = [str(a) for a in args]
    # The in-process run swaps this process's streams, environment and working folder: a test's other
    # threads (concurrent host commands) get real processes.
    if _needs_a_process(argv) or threading.current_thread() is not threading.main_thread():
        return cli_process(*argv, env=env, cwd=cwd, timeout=timeout, stdin=stdin)
    return cli_in_process(*argv, env=env, cwd=cwd, stdin=stdin)


def cli_process(
    *args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float = 60, stdin: str = ""
) -> Done:
    """The command in a real subprocess (`python -m engram_memory ARGS`); `stdin` is all it reads there."""
    done = subprocess.run(
        [sys.executable, "-m", "engram_memory", *(str(a) for a in args)],
        capture_output=True,
        text=True,
        env=clean_env(env),
        cwd=cwd,
        input=stdin,
        timeout=timeout,
        check=False,
    )
    return Done(done.returncode, done.stdout, done.stderr)


class _Pipe(io.TextIOWrapper):
    """What a command writes to a pipe: UTF-8 bytes (strict on stdout, backslashreplace on stderr, as
    Python opens them), not a terminal, no file descriptor."""

    def __init__(self, errors: str) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors=errors, line_buffering=False, write_through=True)

    def received(self) -> str:
        """The bytes read back as `subprocess.run(text=True)` reads them (universal newlines)."""
        self.flush()
        raw = self.buffer
        assert isinstance(raw, io.BytesIO)
        return io.TextIOWrapper(io.BytesIO(raw.getvalue()), encoding="utf-8").read()


def _exit_code(code: object, stderr: io.TextIOBase) -> int:
    """`sys.exit(code)` as the interpreter turns it into a process status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=stderr)
    return 1


@contextmanager
def _as_a_process(
    argv: list[str], env: dict[str, str], cwd: Path | None, stdout: _Pipe, stderr: _Pipe, stdin: str = ""
) -> Iterator[None]:
    """This process dressed as a fresh `engram-memory` one for the length of one command, then restored."""
    from engram_memory.host.cli import common

    saved_env = dict(os.environ)
    saved_cwd = Path.cwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    saved_argv = sys.argv
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    # The consoles were made at import; a pipe gets no colour whatever the test process's terminal was.
    saved_colours = [(console, console._color_system) for console in (common.out, common.err)]
    try:
        os.environ.clear()
        os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        given = io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8")), encoding="utf-8")
        sys.stdin, sys.stdout, sys.stderr = given, stdout, stderr
        sys.argv = ["engram-memory", *argv]
        # No handler on the root logger, as in a fresh process: a warning reaches stderr through logging's
        # last resort, not pytest's log capture.
        root.handlers, root.level = [], logging.WARNING
        for console, _ in saved_colours:
            console._color_system = None
        yield
    finally:
        for console, colour in saved_colours:
            console._color_system = colour
        root.handlers, root.level = saved_handlers, saved_level
        sys.argv = saved_argv
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)


def cli_in_process(
    *args: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None, stdin: str = ""
) -> Done:
    """The command's entry point called in this process, with what a subprocess would have been given."""
    from engram_memory.host.cli.app import main

    argv = [str(a) for a in args]
    stdout, stderr = _Pipe("strict"), _Pipe("backslashreplace")
    with _as_a_process(argv, clean_env(env), cwd, stdout, stderr, stdin):
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = _exit_code(exc.code, stderr)
        except Exception:  # what the interpreter does with an uncaught exception
            traceback.print_exc(file=stderr)
            code = 1
        finally:
            for stream in (stdout, stderr):
                stream.flush()
    return Done(code, stdout.received(), stderr.received())


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


def refused_connection(home: Path, stderr_file: Path, *serve_args: str, env: dict[str, str] | None = None) -> str:
    """The message of the -32603 a server started with these arguments refuses an SDK client's connection with."""
    return refusal_message(lambda: LoggedAgent(home, stderr_file, *serve_args, env=env))
