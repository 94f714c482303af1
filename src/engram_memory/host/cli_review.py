"""Host commands for the review queue: review list|show|accept|reject (issue 3, item 2)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
