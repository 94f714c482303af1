"""sqlite3's errors classified by SQLite's own result codes, for the embedded store and its key vault."""

from __future__ import annotations

import sqlite3
from types import MappingProxyType

from engram_memory.engine.ports.faults import StoreFault
from engram_memory.stores.sql.faults import Faults

# Primary result codes (the low byte of an extended code such as SQLITE_CORRUPT_VTAB or SQLITE_BUSY_SNAPSHOT).
_FAULTS = MappingProxyType(
    {
        sqlite3.SQLITE_CORRUPT: StoreFault.CORRUPT,  # "database disk image is malformed"
        sqlite3.SQLITE_NOTADB: StoreFault.CORRUPT,  # "file is not a database"
        sqlite3.SQLITE_BUSY: StoreFault.BUSY,  # "database is locked": the busy timeout ran out
        sqlite3.SQLITE_LOCKED: StoreFault.BUSY,  # "database table is locked", by this connection's own statement
        sqlite3.SQLITE_FULL: StoreFault.FULL,  # "database or disk is full"
    }
)


def sqlite_fault(exc: BaseException) -> StoreFault:
    """The fault SQLite's result code names. Errors sqlite3 raises itself (a closed connection, a bad
    parameter) and the store's own carry no code: unavailable."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(code, int):
        return StoreFault.UNAVAILABLE
    return _FAULTS.get(code & 0xFF, StoreFault.UNAVAILABLE)


SQLITE = Faults((sqlite3.Error,), sqlite_fault)
