"""Host commands for verify, stats, audit export and revoke (issue 3, items 6, 8, 9)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
