"""The key vault on disk: one SQLite file in the host's keys folder, beside the key-encryption keys.

It holds wrapped data keys and the ids of destroyed ones. It is never part of a store backup: a
data key destroyed here has no other copy, which is what makes forgetting final.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from engram_memory.engine.ports.host_vault import AdoptedCounts, Rewrap, VaultCounts, VaultImage, VaultKey
from engram_memory.engine.ports.store import IssuedBindingRow, RevocationRow, Scope, WrappedKey
from engram_memory.stores.sql.issued import INSERT_ISSUED, WAS_ISSUED, issued_query, issued_row, issued_values
from engram_memory.stores.sql.sign_in import SqlSignInStore
from engram_memory.stores.sql.vault_image import adopt_image, read_image
from engram_memory.stores.sqlite.faults import SQLITE
from engram_memory.stores.sqlite.migrate import migrate

__all__ = ["Rewrap", "SQLiteKeyVault", "VaultCounts", "VaultKey", "vault_counts"]

BUSY_TIMEOUT_MS = 10_000


class SQLiteKeyVault:
    def __init__(self, path: Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.path = path
        self._lock = threading.RLock()
        self._batching = False
        self._deferred: list[tuple[bool, list[str], int]] = []  # (final, owner ids, at_ms) of a batch
        with SQLITE.translated():
            self._db = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
            )
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute("PRAGMA synchronous = FULL")
            self._db.execute("PRAGMA secure_delete = ON")
            self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            migrate(self._db, "vault_migrations")

    def _write(self, sql: str, params: Sequence[object]) -> int:
        with self._lock, SQLITE.translated():
            return self._db.execute(sql, params).rowcount

    def put(self, scope: Scope, owner_id: str, key: WrappedKey, at_ms: int) -> None:
        self._write(
            "INSERT INTO data_keys (owner_id, tenant, workspace, kek_id, wrapped, created_at_ms)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (owner_id, scope.tenant, scope.workspace, key.kek_id, key.wrapped, at_ms),
        )

    def get(self, scope: Scope, owner_id: str) -> WrappedKey | None:
        with self._lock, SQLITE.translated():
            row = self._db.execute(
                "SELECT kek_id, wrapped FROM data_keys WHERE owner_id = ? AND tenant = ? AND workspace = ?",
                (owner_id, scope.tenant, scope.workspace),
            ).fetchone()
        return None if row is None else WrappedKey(kek_id=row[0], wrapped=bytes(row[1]))

    def get_many(self, scope: Scope, owner_ids: Sequence[str]) -> dict[str, WrappedKey]:
        if not owner_ids:
            return {}
        marks = ", ".join("?" for _ in owner_ids)
        with self._lock, SQLITE.translated():
            rows = self._db.execute(
                "SELECT owner_id, kek_id, wrapped FROM data_keys WHERE tenant = ? AND workspace = ?"  # noqa: S608
                f" AND owner_id IN ({marks})",
                (scope.tenant, scope.workspace, *owner_ids),
            ).fetchall()
        return {str(row[0]): WrappedKey(kek_id=str(row[1]), wrapped=bytes(row[2])) for row in rows}

    def _rollback(self) -> None:
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    def _delete_keys(self, owner_ids: Sequence[str], at_ms: int) -> bool:
        with SQLITE.ignored(
            undo=self._rollback, failed="data keys could not be destroyed yet; they will be swept later"
        ):
            self._db.execute("BEGIN IMMEDIATE")
            for owner_id in owner_ids:
                self._db.execute(
                    "INSERT INTO shredded (owner_id, tenant, workspace, destroyed_at_ms)"
                    " SELECT owner_id, tenant, workspace, ? FROM data_keys WHERE owner_id = ?"
                    " ON CONFLICT (owner_id) DO NOTHING",
                    (at_ms, owner_id),
                )
                self._db.execute("DELETE FROM data_keys WHERE owner_id = ?", (owner_id,))
            self._db.execute("COMMIT")
            return True
        return False

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Every key put inside the block commits (and syncs) once, when it ends; keys retired or
        destroyed inside it wait for run_deferred, which the caller runs once the store has committed
        what ended their bodies."""
        with self._lock:
            if self._batching:
                raise RuntimeError("batches do not nest")
            self._deferred = []
            with SQLITE.translated():
                self._db.execute("BEGIN IMMEDIATE")
            self._batching = True
            try:
                yield
            except BaseException:
                self._batching = False
                self._deferred = []
                self._rollback()
                raise
            self._batching = False
            # Unlike a store's, a failed vault COMMIT is STORE_UNAVAILABLE: the store has not committed
            # the bodies these keys seal yet, so a key that was written after all is only an orphan.
            with SQLITE.translated(undo=self._forget_batch):
                if self._db.in_transaction:  # commit_pending may have failed to begin the next one
                    self._db.execute("COMMIT")

    def commit_pending(self) -> None:
        """Commits the batch's keys so far and begins the next transaction of the batch. A key that then
        fails to commit is STORE_UNAVAILABLE as at the batch's end; later keys commit alone until it ends."""
        with self._lock:
            if not self._batching:
                return
            with SQLITE.translated(undo=self._rollback):
                if self._db.in_transaction:
                    self._db.execute("COMMIT")
                self._db.execute("BEGIN IMMEDIATE")

    def _forget_batch(self) -> None:
        self._deferred = []
        self._rollback()

    def run_deferred(self) -> bool:
        """Retires and destroys what the last batch set aside; True when every key is gone."""
        with self._lock:
            deferred, self._deferred = self._deferred, []
            retired = [owner for final, owners, _ in deferred if not final for owner in owners]
            destroyed = [owner for final, owners, _ in deferred if final for owner in owners]
            at_ms = max((at for _, _, at in deferred), default=0)
            done = self.retire(retired, at_ms)
            return self.destroy(destroyed, at_ms) and done

    def retire(self, owner_ids: Sequence[str], at_ms: int) -> bool:
        """Idempotent. Committed without a sync of its own: lost to a power cut, the key is swept later
        (housekeeping), and the next synced commit or checkpoint carries it to disk anyway."""
        if not owner_ids:
            return True
        with self._lock:
            if self._batching:
                self._deferred.append((False, list(owner_ids), at_ms))
                return True
            with SQLITE.ignored():  # not even the sync could be relaxed: not retired yet
                self._db.execute("PRAGMA synchronous = NORMAL")
                try:
                    return self._delete_keys(owner_ids, at_ms)
                finally:
                    with SQLITE.ignored(failed="the vault could not return to synchronous commits"):
                        self._db.execute("PRAGMA synchronous = FULL")
            return False

    def destroy(self, owner_ids: Sequence[str], at_ms: int) -> bool:
        """Idempotent. Records each destroyed id, then pushes the erased pages out of the WAL."""
        if not owner_ids:
            return True
        with self._lock:
            if self._batching:
                self._deferred.append((True, list(owner_ids), at_ms))
                return True
            return self._delete_keys(owner_ids, at_ms) and self.checkpoint()

    def shredded(self, owner_ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        with self._lock, SQLITE.translated():
            for owner_id in owner_ids:
                row = self._db.execute("SELECT 1 FROM shredded WHERE owner_id = ?", (owner_id,)).fetchone()
                if row is not None:
                    found.add(owner_id)
        return found

    def owners_created_before(self, at_ms: int, *, after: str = "", limit: int | None = None) -> list[str]:
        with self._lock, SQLITE.translated():
            rows = self._db.execute(
                "SELECT owner_id FROM data_keys WHERE created_at_ms < ? AND owner_id > ? ORDER BY owner_id LIMIT ?",
                (at_ms, after, -1 if limit is None else limit),
            ).fetchall()
        return [str(row[0]) for row in rows]

    # -- key rotation (host path) -----------------------------------------------------------------
    def kek_ids(self) -> dict[str, int]:
        """How many data keys each key-encryption key wraps."""
        with self._lock, SQLITE.translated():
            rows = self._db.execute("SELECT kek_id, count(*) FROM data_keys GROUP BY kek_id").fetchall()
        return {str(row[0]): int(row[1]) for row in rows}

    def keys_under(self, kek_ids: Sequence[str], limit: int) -> list[VaultKey]:
        """Up to `limit` data keys still wrapped by one of `kek_ids`, in a stable order."""
        if not kek_ids:
            return []
        marks = ", ".join("?" for _ in kek_ids)
        with self._lock, SQLITE.translated():
            rows = self._db.execute(
                "SELECT owner_id, tenant, workspace, kek_id, wrapped FROM data_keys"  # noqa: S608
                f" WHERE kek_id IN ({marks}) ORDER BY owner_id LIMIT ?",
                (*kek_ids, limit),
            ).fetchall()
        return [
            VaultKey(
                owner_id=str(row[0]),
                scope=Scope(tenant=row[1], workspace=row[2]),
                key=WrappedKey(kek_id=str(row[3]), wrapped=bytes(row[4])),
            )
            for row in rows
        ]

    def rewrap(self, moves: Sequence[Rewrap]) -> int:
        """Applies the moves in one transaction; returns how many keys moved.

        Compare-and-set on the old KEK: a key destroyed (or moved) since it was read is left alone,
        so a rotation can never bring back a key that a forget shredded meanwhile.
        """
        if not moves:
            return 0
        moved = 0
        with self._lock, SQLITE.translated(undo=self._rollback):
            self._db.execute("BEGIN IMMEDIATE")
            for move in moves:
                moved += self._db.execute(
                    "UPDATE data_keys SET kek_id = ?, wrapped = ? WHERE owner_id = ? AND kek_id = ?",
                    (move.key.kek_id, move.key.wrapped, move.owner_id, move.old_kek_id),
                ).rowcount
            self._db.execute("COMMIT")
        return moved

    def checkpoint(self) -> bool:
        """Pushes overwritten wraps out of the WAL into the (secure-deleting) main file."""
        with self._lock, SQLITE.ignored():
            row = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            return row is not None and row[0] == 0
        return False

    def revoke(self, row: RevocationRow) -> RevocationRow:
        with self._lock, SQLITE.translated():
            self._db.execute(
                "INSERT INTO revocations (token_id, revoked_at_ms, revoked_by) VALUES (?, ?, ?)"
                " ON CONFLICT (token_id) DO NOTHING",
                (row.token_id, row.revoked_at_ms, row.revoked_by),
            )
            stored = self._db.execute(
                "SELECT token_id, revoked_at_ms, revoked_by FROM revocations WHERE token_id = ?",
                (row.token_id,),
            ).fetchone()
        return RevocationRow(token_id=stored[0], revoked_at_ms=stored[1], revoked_by=stored[2])

    def is_revoked(self, token_id: str) -> bool:
        with self._lock, SQLITE.translated():
            row = self._db.execute("SELECT 1 FROM revocations WHERE token_id = ?", (token_id,)).fetchone()
        return row is not None

    def revocation_count(self) -> int:
        with self._lock, SQLITE.translated():
            return int(self._db.execute("SELECT count(*) FROM revocations").fetchone()[0])

    # -- issued bindings ----------------------------------------------------------------------------
    def record_issued(self, row: IssuedBindingRow) -> None:
        with self._lock, SQLITE.translated():
            db = self._db
            db.execute(INSERT_ISSUED, issued_values(row))

    def was_issued(self, token_id: str) -> bool:
        with self._lock, SQLITE.translated():
            db = self._db
            return db.execute(WAS_ISSUED, (token_id,)).fetchone() is not None

    def issued(
        self, limit: int, *, latest_only_for: str | None = None
    ) -> list[tuple[IssuedBindingRow, RevocationRow | None]]:
        with self._lock, SQLITE.translated():
            db = self._db
            rows = db.execute(*issued_query(limit, latest_only_for)).fetchall()
        return [issued_row(row) for row in rows]

    def counts(self) -> VaultCounts:
        """How many data keys the vault holds and how many it destroyed (ids only)."""
        with self._lock, SQLITE.translated():
            keys = int(self._db.execute("SELECT count(*) FROM data_keys").fetchone()[0])
            destroyed = int(self._db.execute("SELECT count(*) FROM shredded").fetchone()[0])
        return VaultCounts(keys=keys, destroyed=destroyed)

    def image(self) -> VaultImage:
        with self._lock, SQLITE.translated(undo=self._rollback):
            self._db.execute("BEGIN")
            image = read_image(self._db)
            self._db.execute("COMMIT")
        return image

    def adopt(self, image: VaultImage) -> AdoptedCounts:
        with self._lock, SQLITE.translated(undo=self._rollback):
            self._db.execute("BEGIN IMMEDIATE")
            added = adopt_image(self._db, image)
            self._db.execute("COMMIT")
        return added

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock, SQLITE.translated():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def sign_in(self) -> SqlSignInStore:
        """The sign-in tables of this vault (people, OAuth clients, grants, codes, tokens, sessions)."""
        return SqlSignInStore(self._tx)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def vault_counts(path: Path) -> VaultCounts:
    """How many data keys the vault holds and how many it destroyed, read through its own read-only handle.

    Raises ContractError STORE_UNAVAILABLE when the vault cannot be read.
    """
    with SQLITE.translated():
        db = sqlite3.connect(path.absolute().as_uri() + "?mode=ro", uri=True)
        try:
            keys = int(db.execute("SELECT count(*) FROM data_keys").fetchone()[0])
            destroyed = int(db.execute("SELECT count(*) FROM shredded").fetchone()[0])
        finally:
            db.close()
    return VaultCounts(keys=keys, destroyed=destroyed)
