"""What every `engram-memory` command shares: the consoles, the --home and --json options, failing in one line.

Every failure exits non-zero with a one-line reason on stderr; `opened_engine` maps the host's
own faults (no home, bad key file, unavailable store) to such a line.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console

from engram_memory.contract.errors import ContractError
from engram_memory.engine.engine import Engine
from engram_memory.host.compose import HomeError, open_engine
from engram_memory.host.keys.files import KeyFileError
from engram_memory.host.settings import HOME_ENV, HostPaths, resolve_home
from engram_memory.host.terminal import SafeConsole, inline

out: Console = SafeConsole(soft_wrap=True)
err: Console = SafeConsole(stderr=True, soft_wrap=True)

HomeOption = Annotated[
    Path | None,
    typer.Option("--home", envvar=HOME_ENV, help="The host's home folder (store, keys, policy).", show_envvar=True),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]


def one_line(reason: str) -> str:
    """Control characters and line breaks would split a one-line reason; fold them into spaces."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in reason).split())


def fail(reason: str, code: int = 1) -> NoReturn:
    err.print(f"engram-memory: error: {one_line(reason)}", markup=False, highlight=False)
    raise typer.Exit(code=code)


def say(text: str) -> None:
    """One line for a person, printed exactly (no markup, no highlighting); a line break or control
    character inside it (from a value an agent chose) is shown as an escape."""
    out.print(inline(text), markup=False, highlight=False)


@contextmanager
def opened_engine(home: Path | None) -> Iterator[tuple[Engine, HostPaths]]:
    paths = resolve_home(home)
    try:
        with open_engine(paths) as engine:
            yield engine, paths
    except (HomeError, KeyFileError) as exc:
        fail(str(exc))
    except ContractError as exc:
        fail(f"the store is unavailable ({exc.code.value})")
