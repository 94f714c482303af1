"""A vault's keys and logs read whole for a backup, and added to another vault by a restore: one set of
statements for the SQLite and PostgreSQL vaults, run inside the transaction each of them opens."""

from __future__ import annotations

from engram_memory.engine.ports.host_vault import AdoptedCounts, DestroyedKey, HeldKey, VaultImage
from engram_memory.engine.ports.store import RevocationRow, Scope, WrappedKey
from engram_memory.stores.sql.connection import SqlConnection
from engram_memory.stores.sql.issued import INSERT_ISSUED, issued_row, issued_values

_ALL_ISSUED = (
    "SELECT token_id, tenant, workspace, principal, agent_id, session, purpose_ref, grants,"
    " confirm_mutations, trust_class, issued_at_ms, expires_at_ms, issued_by, NULL, NULL"
    " FROM issued_bindings ORDER BY token_id"
)


def read_image(db: SqlConnection) -> VaultImage:
    keys = [
        HeldKey(
            str(r[0]), Scope(tenant=r[1], workspace=r[2]), WrappedKey(kek_id=str(r[3]), wrapped=bytes(r[4])), int(r[5])
        )
        for r in db.execute(
            "SELECT owner_id, tenant, workspace, kek_id, wrapped, created_at_ms FROM data_keys ORDER BY owner_id"
        ).fetchall()
    ]
    destroyed = [
        DestroyedKey(str(r[0]), Scope(tenant=r[1], workspace=r[2]), int(r[3]))
        for r in db.execute(
            "SELECT owner_id, tenant, workspace, destroyed_at_ms FROM shredded ORDER BY owner_id"
        ).fetchall()
    ]
    revocations = [
        RevocationRow(token_id=str(r[0]), revoked_at_ms=int(r[1]), revoked_by=str(r[2]))
        for r in db.execute("SELECT token_id, revoked_at_ms, revoked_by FROM revocations ORDER BY token_id").fetchall()
    ]
    issued = [issued_row(r)[0] for r in db.execute(_ALL_ISSUED).fetchall()]
    return VaultImage(keys=keys, destroyed=destroyed, revocations=revocations, issued=issued)


def adopt_image(db: SqlConnection, image: VaultImage) -> AdoptedCounts:
    """The log of destroyed keys goes in first, and a key destroyed in either is never added."""
    destroyed = 0
    for gone in image.destroyed:
        destroyed += db.execute(
            "INSERT INTO shredded (owner_id, tenant, workspace, destroyed_at_ms) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (owner_id) DO NOTHING",
            (gone.owner_id, gone.scope.tenant, gone.scope.workspace, gone.destroyed_at_ms),
        ).rowcount
    never = {str(row[0]) for row in db.execute("SELECT owner_id FROM shredded").fetchall()}
    keys = 0
    for held in image.keys:
        if held.owner_id in never:
            continue
        keys += db.execute(
            "INSERT INTO data_keys (owner_id, tenant, workspace, kek_id, wrapped, created_at_ms)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (owner_id) DO NOTHING",
            (
                held.owner_id,
                held.scope.tenant,
                held.scope.workspace,
                held.key.kek_id,
                held.key.wrapped,
                held.created_at_ms,
            ),
        ).rowcount
    revocations = 0
    for revocation in image.revocations:
        revocations += db.execute(
            "INSERT INTO revocations (token_id, revoked_at_ms, revoked_by) VALUES (?, ?, ?)"
            " ON CONFLICT (token_id) DO NOTHING",
            (revocation.token_id, revocation.revoked_at_ms, revocation.revoked_by),
        ).rowcount
    issued = 0
    for binding in image.issued:
        issued += db.execute(INSERT_ISSUED + " ON CONFLICT (token_id) DO NOTHING", issued_values(binding)).rowcount
    return AdoptedCounts(keys=keys, destroyed=destroyed, revocations=revocations, issued=issued)
