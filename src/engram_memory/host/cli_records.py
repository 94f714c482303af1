"""Host commands for lifecycle maintenance (issue 3, item 3).

records dispute|resolve|supersede|mark-non-current|rewind|expire|trust-invalidate|tombstone.
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Adds this module's commands to the main `engram-memory` app."""
