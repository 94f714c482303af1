"""What kind of fault lies behind a store's error, said by the store, so the engine never reads driver text.

Only the store knows its driver's error codes; the engine needs to tell a damaged file from a busy
one (verify names them differently) and a conflict it may simply run again from everything else.
"""

from __future__ import annotations

from enum import StrEnum

from engram_memory.contract.errors import ContractError, ErrorCode


class StoreFault(StrEnum):
    """The cause a store found behind a failure. Where it failed (before COMMIT or at it) is the
    error code's to say instead: a COMMIT that found the disk full is both FULL and of unknown outcome."""

    UNAVAILABLE = "unavailable"  # anything else: the connection, the file system, a permission, an invariant
    BUSY = "busy"  # another writer held the lock for longer than the store waits
    CORRUPT = "corrupt"  # the database file, or a page or index of it, is damaged
    FULL = "full"  # the disk (or the file's size limit) has no room for the next page
    CONFLICT = "conflict"  # rolled back for a concurrent transaction: nothing was written


class StoreError(ContractError):
    """A driver's error as the contract sees it: the caller's code, and the fault the store found behind it.

    The agent sees only the code; the fault is for the engine and the host (verify's wording, logs).
    """

    def __init__(self, code: ErrorCode, fault: StoreFault) -> None:
        super().__init__(code)
        self.fault = fault


class TransientConflict(StoreError):
    """The store rolled a transaction back only because a concurrent one conflicted with it.

    PostgreSQL reports these as serialization failures and deadlocks (SQLSTATE 40001, 40P01). Nothing
    was written, so the same body may simply run again (engine/mutation.py does, a bounded number of
    times); a caller that does not retry sees what it is: STORE_UNAVAILABLE, retriable. Only a store's
    own transaction boundary raises it, because only there is the whole body known to be rolled back.
    """

    def __init__(self) -> None:
        super().__init__(ErrorCode.STORE_UNAVAILABLE, StoreFault.CONFLICT)


def fault_of(error: ContractError) -> StoreFault | None:
    """The fault behind a store's error; None for an error the engine or the contract raised itself."""
    return error.fault if isinstance(error, StoreError) else None
