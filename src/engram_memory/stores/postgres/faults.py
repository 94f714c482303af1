"""psycopg's errors classified by the server's SQLSTATE, for the server store and its key vault.

Imported only by the PostgreSQL store and vault, so `import engram_memory` never loads psycopg.
"""

from __future__ import annotations

from types import MappingProxyType

import psycopg

from engram_memory.engine.ports.faults import StoreFault
from engram_memory.stores.sql.faults import Faults

_FAULTS = MappingProxyType(
    {
        # The server rolled the transaction back for a concurrent one: run it again.
        "40001": StoreFault.CONFLICT,  # serialization_failure
        "40P01": StoreFault.CONFLICT,  # deadlock_detected
        "55P03": StoreFault.BUSY,  # lock_not_available: lock_timeout ran out, as SQLite's busy timeout does
        "53100": StoreFault.FULL,  # disk_full
        "XX001": StoreFault.CORRUPT,  # data_corrupted
        "XX002": StoreFault.CORRUPT,  # index_corrupted
    }
)


def postgres_fault(exc: BaseException) -> StoreFault:
    """The fault the server's SQLSTATE names. Errors of the client (a lost connection, an exhausted
    pool) carry none: unavailable."""
    sqlstate = exc.sqlstate if isinstance(exc, psycopg.Error) else None
    return _FAULTS.get(sqlstate or "", StoreFault.UNAVAILABLE)


POSTGRES = Faults((psycopg.Error,), postgres_fault)
