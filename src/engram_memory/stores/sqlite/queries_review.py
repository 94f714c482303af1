"""SQL for the host's review path, mixed into the one transaction class (see queries.py)."""

from __future__ import annotations

import sqlite3


class ReviewQueries:
    """Host-path statements; each names its scope, or says why it spans scopes."""

    _db: sqlite3.Connection
