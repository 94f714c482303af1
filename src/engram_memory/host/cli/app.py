"""The `engram-memory` command: the host's interface. No agent ever reaches it.

Every subcommand takes `--home DIR` (or `ENGRAM_HOME`), before or after its name; listings take `--json`;
`--version` prints the installed version; every failure exits
non-zero with a one-line reason on stderr. Each module of this package adds its commands in one way:
plain functions, and a `register(app)` that names them.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated, Any

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
from engram_memory.host.cli.speaking import LanguageRequestError, chosen_language, translate_help, usage_error
from engram_memory.host.language.catalogue import _, speaking
from engram_memory.host.language.choice import Language

app = typer.Typer(
    rich_markup_mode=None,
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
        say(_("engram-memory {version}").format(version=__version__))
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
    lang: Annotated[
        str | None,
        typer.Option(
            "--lang",
            metavar="LANG",
            help="The language of messages and help: en, ko, zh-Hans, zh-Hant or ja (default: from LANGUAGE, "
            "LC_ALL, LC_MESSAGES or LANG); also accepted after the subcommand.",
            show_default=False,
        ),
    ] = None,
) -> None:
    if home is not None:
        ctx.meta[GLOBAL_HOME] = home


def _usage_error(message: str, code: int) -> None:
    err.print(_("engram-memory: error: {reason}").format(reason=one_line(message)), markup=False, highlight=False)
    sys.exit(code)


@functools.cache
def _command_tree(language: Language) -> Any:
    """The command tree with its help in one language, built once a process: Typer builds a fresh tree on
    every call (a tenth of a second), and a process that runs the command many times (the tests) pays it
    once per language."""
    with speaking(language):
        command = typer.main.get_command(app)
        translate_help(command)
    return command


def main() -> None:
    """Runs the CLI in the person's language; usage errors get the same one-line reason as every other
    failure."""
    try:
        language, arguments = chosen_language(sys.argv[1:], os.environ)
    except LanguageRequestError as exc:
        choices = ", ".join(language.value for language in Language)
        _usage_error(_("--lang takes one of {choices}, not {value!r}").format(choices=choices, value=str(exc)), 2)
        return
    with speaking(language):
        command = _command_tree(language)
        try:
            code = command(arguments or ["--help"], standalone_mode=False)
        except typer.Abort:
            _usage_error(_("aborted"), 130)
        except typer.TyperException as exc:  # usage errors: unknown command, missing or bad option
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            _usage_error(usage_error(message), getattr(exc, "exit_code", 2))
        sys.exit(code if isinstance(code, int) else 0)
