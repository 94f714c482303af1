"""`engram-memory console`: the host's review, approvals, records, bindings, audit and health in a browser."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from engram_memory.contract.errors import ContractError
from engram_memory.host.cli.common import HomeOption, err, fail, say
from engram_memory.host.compose import HomeError
from engram_memory.host.keys.files import KeyFileError
from engram_memory.host.language.catalogue import _
from engram_memory.host.settings import resolve_home

# The console's port, here rather than beside the web app: importing the app (Starlette, uvicorn, the MCP
# server it shares a listener with) costs every other command half a second of start-up. One above
# `serve --http`'s 8765, so both run side by side without a --port.
DEFAULT_PORT = 8766


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
    app.command("console")(console)


def console(
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The loopback port to listen on (0 picks a free one).")
    ] = DEFAULT_PORT,
    home: HomeOption = None,
) -> None:
    """Open the host's console on 127.0.0.1: prints a one-time login link, serves until Ctrl-C."""
    from engram_memory.host.console.serve import serve_console
    from engram_memory.host.serve.http import ListenError

    def announce(url: str) -> None:
        say(_("engram-memory console: open this link once, in the browser on this machine:"))
        say(f"  {url}")
        err.print(_("engram-memory: the link works once; restart the console for a new one"), highlight=False)
        sys.stdout.flush()

    try:
        serve_console(resolve_home(home), port=port, announce=announce)
    except (HomeError, KeyFileError, ListenError) as exc:
        fail(str(exc))
    except ContractError as exc:
        fail(_("the store is unavailable ({code})").format(code=exc.code.value))
