"""The key vault in a PostgreSQL database of its own (`init --vault`), never the store's database.

It holds wrapped data keys, the ids of destroyed ones and binding revocations, like the SQLite vault.
A dump of the store database therefore never carries a data key, and a key destroyed here has no
other copy in any store backup. Row-level security confines the runtime role to the tenant its
transaction names; destroying keys by id goes through engram_destroy_data_keys, which can only erase.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import psycopg

from engram_memory.contract.errors import ContractError
from engram_memory.engine.ports.host_vault import AdoptedCounts, Rewrap, VaultCounts, VaultImage, VaultKey
from engram_memory.engine.ports.store import IssuedBindingRow, RevocationRow, Scope, WrappedKey
from engram_memory.stores.postgres.connection import Connection, PsycopgConnection, open_pool
from engram_memory.stores.postgres.faults import POSTGRES
from engram_memory.stores.postgres.migrate import VAULT_MIGRATIONS, migrate, pending
from engram_memory.stores.postgres.store import CONNECT_TIMEOUT_S, SchemaNotCurrent
from engram_memory.stores.sql.issued import INSERT_ISSUED, WAS_ISSUED, issued_query, issued_row, issued_values
from engram_memory.stores.sql.sign_in import SqlSignInStore
from engram_memory.stores.sql.vault_image import adopt_image, read_image

logger = logging.getLogger(__name__)

VAULT_POOL_SIZE = 2


@dataclass(frozen=True)
class _HeldKey:
    scope: Scope
    key: WrappedKey
    at_ms: int


@dataclass
class _Pending:
    """A thread's batch: keys not committed yet, and retirements that wait for the store's commit."""

    keys: dict[str, _HeldKey] = field(default_factory=dict)
    deferred: list[tuple[bool, list[str], int]] = field(default_factory=list)  # (final, owner ids, at_ms)


def _last(deferred: Sequence[tuple[bool, list[str], int]]) -> int:
    return max((at for _, _, at in deferred), default=0)


class PostgresKeyVault:
    """Every method commits on its own (see the KeyVault port)."""

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = VAULT_POOL_SIZE,
        run_migrations: bool = True,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        prepared_statements: bool = True,
    ) -> None:
        """`prepared_statements=False`: none on the server (a pooler in transaction mode).

        Raises ContractError STORE_UNAVAILABLE, MIGRATION_LEDGER_INVALID, SchemaNotCurrent."""
        self._timeout_s = connect_timeout_s
        self._batches: dict[int, _Pending] = {}  # by thread, like the store's
        self._deferred: dict[int, list[tuple[bool, list[str], int]]] = {}

        def prepare(connection: Connection) -> None:
            if run_migrations:
                migrate(connection, VAULT_MIGRATIONS)
            else:
                behind = pending(connection, VAULT_MIGRATIONS)
                if behind:
                    raise SchemaNotCurrent(behind)
            row = connection.execute(
                "SELECT pg_has_role(current_user, relowner, 'USAGE')"
                " OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
                " FROM pg_class WHERE oid = 'data_keys'::regclass"
            ).fetchone()
            self._may_vacuum = bool(row and row[0])

        with POSTGRES.translated():
            self._pool = open_pool(
                url,
                size=pool_size,
                timeout_s=connect_timeout_s,
                name="engram-vault",
                prepare=prepare,
                prepared=prepared_statements,
            )

    @contextmanager
    def _tx(self, tenant: str | None = None) -> Iterator[PsycopgConnection]:
        """One committed transaction, naming its tenant for row-level security; STORE_UNAVAILABLE on failure.

        A failed COMMIT is STORE_UNAVAILABLE too (see SQLiteKeyVault.batch), and a conflict is no
        TransientConflict: running again is for the store's transaction, whose rollback undoes the whole body."""
        with POSTGRES.translated():
            connection = self._pool.getconn(timeout=self._timeout_s)
        db = PsycopgConnection(connection)
        try:
            with POSTGRES.translated():
                db.execute("BEGIN")
                if tenant is not None:
                    db.execute("SELECT set_config('app.tenant', ?, true)", (tenant,))
                yield db
                db.execute("COMMIT")
        except BaseException:
            _rollback(connection)
            raise
        finally:
            self._pool.putconn(connection)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """This thread's keys put inside the block commit together when it ends (or earlier, when the
        store commits early: commit_pending), and its thread reads them meanwhile; keys retired or
        destroyed inside it wait for run_deferred, once the store committed what ended their bodies."""
        thread = threading.get_ident()
        if thread in self._batches:
            raise RuntimeError("batches do not nest")
        pending = _Pending()
        self._batches[thread] = pending
        try:
            yield
        finally:
            del self._batches[thread]
        # A failed commit here is STORE_UNAVAILABLE: the store has not committed these keys' bodies yet.
        self._put_all(pending.keys)
        self._deferred[thread] = pending.deferred

    def commit_pending(self) -> None:
        """Commits this thread's batch's keys so far, before the store commits their bodies early."""
        pending = self._batches.get(threading.get_ident())
        if pending is not None:
            keys, pending.keys = pending.keys, {}
            self._put_all(keys)

    def run_deferred(self) -> bool:
        deferred = self._deferred.pop(threading.get_ident(), [])
        done = self.retire([owner for final, owners, _ in deferred if not final for owner in owners], _last(deferred))
        return (
            self.destroy([owner for final, owners, _ in deferred if final for owner in owners], _last(deferred))
            and done
        )

    def put(self, scope: Scope, owner_id: str, key: WrappedKey, at_ms: int) -> None:
        pending = self._batches.get(threading.get_ident())
        if pending is not None:
            pending.keys[owner_id] = _HeldKey(scope, key, at_ms)
        else:
            self._put_all({owner_id: _HeldKey(scope, key, at_ms)})

    def _put_all(self, keys: dict[str, _HeldKey]) -> None:
        """One transaction for all of them, one insert per tenant (row-level security checks each)."""
        if not keys:
            return
        by_tenant: dict[str, list[tuple[str, _HeldKey]]] = {}
        for owner_id, held in keys.items():
            by_tenant.setdefault(held.scope.tenant, []).append((owner_id, held))
        with self._tx() as db:
            for tenant, rows in by_tenant.items():
                db.execute("SELECT set_config('app.tenant', ?, true)", (tenant,))
                db.execute(
                    "INSERT INTO data_keys (owner_id, tenant, workspace, kek_id, wrapped, created_at_ms)"
                    " SELECT * FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::bytea[], ?::bigint[])",
                    (
                        [owner for owner, _ in rows],
                        [tenant] * len(rows),
                        [held.scope.workspace for _, held in rows],
                        [held.key.kek_id for _, held in rows],
                        [held.key.wrapped for _, held in rows],
                        [held.at_ms for _, held in rows],
                    ),
                )

    def _held(self, scope: Scope, owner_ids: Sequence[str]) -> dict[str, WrappedKey]:
        """The keys among these owners that this thread's batch put and has not committed yet."""
        pending = self._batches.get(threading.get_ident())
        if pending is None:
            return {}
        found = {owner: pending.keys.get(owner) for owner in owner_ids}
        return {owner: held.key for owner, held in found.items() if held is not None and held.scope == scope}

    def get(self, scope: Scope, owner_id: str) -> WrappedKey | None:
        held = self._held(scope, [owner_id])
        if held:
            return held[owner_id]
        with self._tx(scope.tenant) as db:
            row = db.execute(
                "SELECT kek_id, wrapped FROM data_keys WHERE owner_id = ? AND tenant = ? AND workspace = ?",
                (owner_id, scope.tenant, scope.workspace),
            ).fetchone()
        return None if row is None else WrappedKey(kek_id=row[0], wrapped=bytes(row[1]))

    def get_many(self, scope: Scope, owner_ids: Sequence[str]) -> dict[str, WrappedKey]:
        held = self._held(scope, owner_ids)
        wanted = [owner for owner in owner_ids if owner not in held]
        if not wanted:
            return held
        with self._tx(scope.tenant) as db:
            rows = db.execute(
                "SELECT owner_id, kek_id, wrapped FROM data_keys WHERE tenant = ? AND workspace = ?"
                " AND owner_id = ANY (?::text[])",
                (scope.tenant, scope.workspace, wanted),
            ).fetchall()
        return held | {str(row[0]): WrappedKey(kek_id=str(row[1]), wrapped=bytes(row[2])) for row in rows}

    def destroy(self, owner_ids: Sequence[str], at_ms: int) -> bool:
        """Idempotent. True once none of the keys is left in a committed state.

        The deleted row versions are vacuumed at once when this role may (the owner), else by autovacuum;
        a wrapped key opens nothing without the key-encryption key, which never enters the database.
        """
        if self._defer(True, owner_ids, at_ms):
            return True
        gone = self._retire(owner_ids, at_ms)
        if owner_ids and self._may_vacuum:
            self.checkpoint()
        return gone

    def retire(self, owner_ids: Sequence[str], at_ms: int) -> bool:
        """Idempotent. Left to autovacuum: the plaintext these keys opened lives on under another key."""
        return self._defer(False, owner_ids, at_ms) or self._retire(owner_ids, at_ms)

    def _defer(self, final: bool, owner_ids: Sequence[str], at_ms: int) -> bool:
        pending = self._batches.get(threading.get_ident())
        if pending is not None and owner_ids:
            pending.deferred.append((final, list(owner_ids), at_ms))
        return pending is not None

    def _retire(self, owner_ids: Sequence[str], at_ms: int) -> bool:
        if not owner_ids:
            return True
        try:
            with self._tx() as db:
                left = db.execute("SELECT engram_destroy_data_keys(?, ?)", (list(owner_ids), at_ms)).fetchone()
        except ContractError:
            logger.error("data keys could not be destroyed yet; they will be swept later")
            return False
        return left is not None and int(left[0]) == 0

    def shredded(self, owner_ids: Sequence[str]) -> set[str]:
        # Host path (restore): ids only, across tenants.
        with self._tx() as db:
            rows = db.execute("SELECT owner_id FROM shredded WHERE owner_id = ANY (?)", (list(owner_ids),)).fetchall()
        return {str(row[0]) for row in rows}

    def owners_created_before(self, at_ms: int, *, after: str = "", limit: int | None = None) -> list[str]:
        # Host path (housekeeping, verify): across tenants, a page at a time in owner order.
        with self._tx() as db:
            rows = db.execute(
                "SELECT owner_id FROM data_keys WHERE created_at_ms < ? AND owner_id > ? ORDER BY owner_id LIMIT ?",
                (at_ms, after, limit),
            ).fetchall()
        return [str(row[0]) for row in rows]

    # -- key rotation (host path) -----------------------------------------------------------------
    def kek_ids(self) -> dict[str, int]:
        with self._tx() as db:
            rows = db.execute("SELECT kek_id, count(*) FROM data_keys GROUP BY kek_id").fetchall()
        return {str(row[0]): int(row[1]) for row in rows}

    def keys_under(self, kek_ids: Sequence[str], limit: int) -> list[VaultKey]:
        if not kek_ids:
            return []
        with self._tx() as db:
            rows = db.execute(
                "SELECT owner_id, tenant, workspace, kek_id, wrapped FROM data_keys"
                " WHERE kek_id = ANY (?) ORDER BY owner_id LIMIT ?",
                (list(kek_ids), limit),
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
        """Applies the moves in one transaction, compare-and-set on the old KEK (see SQLiteKeyVault.rewrap)."""
        if not moves:
            return 0
        moved = 0
        with self._tx() as db:
            for move in moves:
                moved += db.execute(
                    "UPDATE data_keys SET kek_id = ?, wrapped = ? WHERE owner_id = ? AND kek_id = ?",
                    (move.key.kek_id, move.key.wrapped, move.owner_id, move.old_kek_id),
                ).rowcount
        return moved

    def checkpoint(self) -> bool:
        """VACUUMs the key table so replaced and deleted wraps leave its pages; False when this role may not."""
        if not self._may_vacuum:
            return False
        with POSTGRES.ignored():
            connection = self._pool.getconn(timeout=self._timeout_s)
            try:
                connection.execute("VACUUM data_keys")
            finally:
                self._pool.putconn(connection)
            return True
        return False

    # -- revocations ------------------------------------------------------------------------------
    def revoke(self, row: RevocationRow) -> RevocationRow:
        with self._tx() as db:
            db.execute(
                "INSERT INTO revocations (token_id, revoked_at_ms, revoked_by) VALUES (?, ?, ?)"
                " ON CONFLICT (token_id) DO NOTHING",
                (row.token_id, row.revoked_at_ms, row.revoked_by),
            )
            stored = db.execute(
                "SELECT token_id, revoked_at_ms, revoked_by FROM revocations WHERE token_id = ?", (row.token_id,)
            ).fetchone()
        return RevocationRow(token_id=stored[0], revoked_at_ms=stored[1], revoked_by=stored[2])

    def is_revoked(self, token_id: str) -> bool:
        with self._tx() as db:
            return db.execute("SELECT 1 FROM revocations WHERE token_id = ?", (token_id,)).fetchone() is not None

    def revocation_count(self) -> int:
        with self._tx() as db:
            return int(db.execute("SELECT count(*) FROM revocations").fetchone()[0])

    # -- issued bindings ----------------------------------------------------------------------------
    def record_issued(self, row: IssuedBindingRow) -> None:
        with self._tx() as db:
            db.execute(INSERT_ISSUED, issued_values(row))

    def was_issued(self, token_id: str) -> bool:
        with self._tx() as db:
            return db.execute(WAS_ISSUED, (token_id,)).fetchone() is not None

    def issued(
        self, limit: int, *, latest_only_for: str | None = None
    ) -> list[tuple[IssuedBindingRow, RevocationRow | None]]:
        with self._tx() as db:
            rows = db.execute(*issued_query(limit, latest_only_for)).fetchall()
        return [issued_row(row) for row in rows]

    def counts(self) -> VaultCounts:
        # Host path (stats): ids counted across tenants, nothing read.
        with self._tx() as db:
            keys = int(db.execute("SELECT count(*) FROM data_keys").fetchone()[0])
            destroyed = int(db.execute("SELECT count(*) FROM shredded").fetchone()[0])
        return VaultCounts(keys=keys, destroyed=destroyed)

    def image(self) -> VaultImage:
        with self._tx() as db:
            db.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            return read_image(db)

    def adopt(self, image: VaultImage) -> AdoptedCounts:
        with self._tx() as db:
            return adopt_image(db, image)

    def sign_in(self) -> SqlSignInStore:
        """The sign-in tables of this vault (people, OAuth clients, grants, codes, tokens, sessions)."""
        return SqlSignInStore(self._tx)

    def close(self) -> None:
        self._pool.close()


def _rollback(connection: Connection) -> None:
    if connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        with POSTGRES.ignored(failed="rollback failed"):
            connection.execute("ROLLBACK")
