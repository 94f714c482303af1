"""SQL for the host's maintenance path, mixed into the one transaction class (see queries.py)."""

from __future__ import annotations

import sqlite3


class MaintenanceQueries:
    """Host-path statements; each names its scope, or says why it spans scopes."""

    _db: sqlite3.Connection
