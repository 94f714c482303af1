"""The engine's ports: what it needs from a store, a key vault, a key ring, a policy source and a clock.

Stores implement `Store`; every engine rule lives above this line, so SQLite and PostgreSQL only
persist and fetch. The transaction protocol is assembled from one protocol per concern (the agent
calls' in agent_tx.py; review, maintenance and operations in their own modules), and each caller takes
the narrowest that serves it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from engram_memory.engine.ports.agent_tx import (
    CoreTx,
)
from engram_memory.engine.ports.faults import StoreError, StoreFault, TransientConflict
from engram_memory.engine.ports.maintenance import MaintenanceTx
from engram_memory.engine.ports.operations import OperationsTx
from engram_memory.engine.ports.review import ReviewTx
from engram_memory.engine.ports.rows import (
    Actor,
    AuditRow,
    CandidateRow,
    ConfirmationRow,
    IdempotencyRow,
    IndexedDoc,
    IndexStats,
    IssuedBindingRow,
    JournalEvent,
    RecordChange,
    RecordRow,
    RevocationRow,
    Scope,
    ScopeHead,
    SealedBody,
    StoredVector,
    UnembeddedRecord,
    WrappedKey,
)

__all__ = [
    "Actor",
    "AuditRow",
    "CandidateRow",
    "Clock",
    "ConfirmationRow",
    "CoreTx",
    "IdempotencyRow",
    "IndexStats",
    "IndexedDoc",
    "IssuedBindingRow",
    "JournalEvent",
    "KeyRing",
    "KeyVault",
    "RecordChange",
    "RecordRow",
    "RevocationRow",
    "Scope",
    "ScopeHead",
    "SealedBody",
    "Store",
    "StoreError",
    "StoreFault",
    "StoreTx",
    "StoredVector",
    "TransientConflict",
    "UnembeddedRecord",
    "WrappedKey",
]


class StoreTx(CoreTx, ReviewTx, MaintenanceTx, OperationsTx, Protocol):
    """One transaction. Writes are only legal inside `Store.write()`."""


class Store(Protocol):
    """Where state lives. A driver's error reaches the engine only as a StoreError, whose fault
    (busy, corrupt, full, ...) the store classified from its driver's own codes."""

    def write(self, *, synced: bool = True, scopes: Collection[Scope] | None = None) -> AbstractContextManager[StoreTx]:
        """A serialised write transaction; ContractError STORE_UNAVAILABLE before commit,
        MUTATION_OUTCOME_UNKNOWN when the commit itself fails, TransientConflict when the store
        rolled it back for a concurrent transaction (the body may run again).

        `scopes` names every scope whose rows the transaction reads to decide or writes: it is
        serialised against every other writer of those scopes, and a store may let writers of other
        scopes commit beside it. An empty collection writes rows of no scope's state (audit rows);
        None (the default) is serialised against every writer of the store.

        `synced=False` (audit rows only) commits without waiting for the disk: a power cut may lose
        the last such rows, never a mutation, and the next synced commit carries them to disk."""
        ...

    def append_audit(self, row: AuditRow) -> None:
        """Writes one audit row as `write(synced=False, scopes=())` would; inside a batch a store may hold
        it back to the batch's next commit, so it commits with the writes it audits (or is lost with them,
        as theirs would be). ContractError STORE_UNAVAILABLE when it cannot be written or held."""
        ...

    def read(self, *, scope: Scope | None = None) -> AbstractContextManager[StoreTx]:
        """A consistent snapshot for reads; ContractError STORE_UNAVAILABLE on failure.

        `scope`: the read looks at that scope alone (a search, a get), and a store may answer it from a
        replica that holds at least every write of the scope this process committed and every snapshot
        of it this process read. TransientConflict: the replica failed under the read, which may simply
        run again (engine/recall/reading.py)."""
        ...

    def batch(self, before_commit: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        """Writes of this thread inside the block may share commits (a host's import): each still rolls
        back alone when it fails, and the end raises MUTATION_OUTCOME_UNKNOWN when a commit of the block
        failed. A store may commit before the block ends (in chunks, or each write alone): it then calls
        `before_commit` first, which makes durable what the committed bodies need (the vault's keys put
        so far), and a failure of it fails the batch like a lost commit."""
        ...

    def expect_idempotency(self, scope: Scope, principal: str, keys: Sequence[str]) -> None:
        """A hint inside a batch: the scope's principal will look these keys up, in about this order, and
        write in the scope, so a store may read the keys together and open its transactions for this scope
        with the batch's others. It changes no answer."""
        ...

    def erase_physically(self, *, now: bool = False) -> bool:
        """Push erased bytes out of every file (WAL included); False when readers held it back, or when a
        store compacts erasures together after a bounded delay (PostgreSQL) and it has not passed:
        `now` does not wait for it."""
        ...

    def refresh_statistics(self) -> None:
        """After a bulk import: the query planner's statistics brought up to the store's new size, so the
        next searches are planned for it at once rather than after the database's own background pass.
        Best effort (a role that may not is a no-op); it changes no answer."""
        ...

    @property
    def index_name(self) -> str: ...

    def close(self) -> None: ...


class KeyVault(Protocol):
    """Where data keys and binding revocations live: outside the store and its backups.

    Destroying a key here is final, and a revocation here survives any restore of the store.

    Every method commits on its own: a key is put before the store commits the body it opens, and
    destroyed after the store commits the change that ends the body, so a crash in between leaves
    at worst a key without a body (swept later), never a body that lost its key.
    """

    def put(self, scope: Scope, owner_id: str, key: WrappedKey, at_ms: int) -> None: ...
    def batch(self) -> AbstractContextManager[None]:
        """Keys put inside the block may commit together when it ends, which must precede the store's
        commit of the bodies they open; retire and destroy then wait for run_deferred."""
        ...

    def commit_pending(self) -> None:
        """Inside a batch, commits the keys put so far and goes on batching: the store calls it before it
        commits bodies early (Store.batch). Raises ContractError STORE_UNAVAILABLE; no-op outside one."""
        ...

    def run_deferred(self) -> bool:
        """Retires and destroys what the last batch set aside, once the store committed; True when done."""
        ...

    def get(self, scope: Scope, owner_id: str) -> WrappedKey | None: ...
    def get_many(self, scope: Scope, owner_ids: Sequence[str]) -> dict[str, WrappedKey]:
        """The scope's keys among these owners, in one read (the bodies of a page of search hits)."""
        ...

    def destroy(self, owner_ids: Sequence[str], at_ms: int) -> bool:
        """True when none of the keys exists any more and the erased bytes left every file."""
        ...

    def retire(self, owner_ids: Sequence[str], at_ms: int) -> bool:
        """Destroys keys whose plaintext lives on under another key (an admitted candidate's), without
        forcing the erased bytes out of every file now: the next destroy does that. True when none of
        the keys exists any more."""
        ...

    def shredded(self, owner_ids: Sequence[str]) -> set[str]: ...
    def revoke(self, row: RevocationRow) -> RevocationRow:
        """Idempotent: the revocation now on file (the first one, when the token was already revoked)."""
        ...

    def is_revoked(self, token_id: str) -> bool: ...
    def revocation_count(self) -> int: ...
    def record_issued(self, row: IssuedBindingRow) -> None:
        """Keeps a binding's claims as the host signs it (an id is never issued twice)."""
        ...

    def was_issued(self, token_id: str) -> bool: ...
    def issued(
        self, limit: int, *, latest_only_for: str | None = None
    ) -> list[tuple[IssuedBindingRow, RevocationRow | None]]:
        """The bindings on file, newest first, each with its revocation if it has one; those issued by
        `latest_only_for` only as the newest of their session."""
        ...

    def owners_created_before(self, at_ms: int, *, after: str = "", limit: int | None = None) -> list[str]:
        """Owners of keys created before `at_ms`, in owner order: those after `after`, at most `limit`."""
        ...

    def close(self) -> None: ...


class KeyRing(Protocol):
    """Key-encryption keys, kept outside the data store (host key file or a KMS)."""

    @property
    def active_kek_id(self) -> str: ...
    def wrap(self, data_key: bytes) -> tuple[str, bytes]: ...
    def unwrap(self, kek_id: str, wrapped: bytes) -> bytes: ...


class Clock(Protocol):
    def now_ms(self) -> int: ...
