"""The `engram-memory` command: the host's interface. No agent ever reaches it.

Every subcommand takes `--home DIR` (or `ENGRAM_HOME`), before or after its name; listings take `--json`;
`--version` prints the installed version; every failure exits
non-zero with a one-line reason on stderr. Each module of this package adds its commands in one way:
plain functions, and a `register(app)` that names them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from engram_memory import __version__
from engram_memory.host.cli import (
    access,
    bindings,
    confirmations,
    console,
    home,
    keys,
    operations,
    people,
    records,
    recovery_key,
    reindex,
    review,
    serve,
    tenants,
    transfer,
)
from engram_memory.host.cli.common import GLOBAL_HOME, err, one_line, say

app = typer.Typer(
    name="engram-memory",
    help="Governed long-term memory for AI agents over MCP: the host's command line.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for module in (
    home,
    bindings,
    access,
    people,
    serve,
    confirmations,
    review,
    console,
    records,
    transfer,
    operations,
    keys,
    recovery_key,
    reindex,
    tenants,
):
    module.register(app)


def _print_version(value: bool) -> None:
    if value:
        say(f"engram-memory {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    home: Annotated[
        Path | None,
        typer.Option("--home", help="The host's home folder, for the subcommand that follows.", show_default=False),
    ] = None,
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit.")
    ] = False,
) -> None:
    if home is not None:
        ctx.meta[GLOBAL_HOME] = home


def main() -> None:
    """Runs the CLI; usage errors get the same one-line reason as every other failure."""
    arguments = sys.argv[1:] or ["--help"]
    try:
        code = app(arguments, standalone_mode=False)
    except typer.Abort:
        err.print("engram-memory: error: aborted", markup=False, highlight=False)
        sys.exit(130)
    except typer.TyperException as exc:  # usage errors: unknown command, missing or bad option
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        err.print(f"engram-memory: error: {one_line(message)}", markup=False, highlight=False)
        sys.exit(getattr(exc, "exit_code", 2))
    sys.exit(code if isinstance(code, int) else 0)
