"""Host commands for rotate-keys, backup and restore (issue 3, items 4 and 5)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
