"""Faults that cannot be caused on demand, simulated at the one seam where they happen."""

from __future__ import annotations

import sqlite3

from engram_memory.stores.sqlite.store import SQLiteStore


class CommitReplyLost(SQLiteStore):
    """Simulated fault: the commit happens, then the driver reports an error (a reply lost in flight)."""

    armed = False

    def _commit(self) -> None:
        super()._commit()
        if self.armed:
            self.armed = False
            raise sqlite3.OperationalError("disk I/O error")
