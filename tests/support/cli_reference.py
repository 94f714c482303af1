"""docs/cli-reference.md: the `--help` of every command, as the command itself prints it (in English).

The page calls `cli_reference()` from a `[[[cog ... ]]]` block; `make docs` rewrites it and
tests/test_docs.py fails when the committed page differs from what the command tree prints now, so a
command's help cannot change without its reference changing with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import click
import typer.main

from engram_memory.host.cli.app import app

WIDTH = 100


def commands(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command and group of the tree with its path, the root first, children in name order."""
    command = typer.main.get_command(app) if command is None else command
    yield path, command
    for name, child in sorted(getattr(command, "commands", {}).items()):
        yield from commands(child, (*path, name))


def help_text(path: tuple[str, ...], command: Any, root: Any) -> str:
    """What `engram-memory PATH --help` prints, at a fixed width so the page does not follow a terminal."""
    context = click.Context(root, info_name="engram-memory", terminal_width=WIDTH, max_content_width=WIDTH)
    walked = root
    for name in path:
        walked = walked.commands[name]
        context = click.Context(walked, info_name=name, parent=context, terminal_width=WIDTH)
    return command.get_help(context)


def cli_reference() -> str:
    root = typer.main.get_command(app)
    sections = []
    for path, command in commands(root):
        name = " ".join(("engram-memory", *path))
        sections.append(f"## `{name}`\n\n```text\n{help_text(path, command, root).rstrip()}\n```\n")
    return "\n" + "\n".join(sections)
