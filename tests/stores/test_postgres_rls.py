"""Row-level security: the second wall behind the engine's scoping, proved with raw SQL as the runtime role.

The runtime role is given every table privilege here on purpose, so that nothing but the policies stands
between tenant A's transaction and tenant B's rows: the engine's own scoping is bypassed entirely.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from engram_memory.engine import journal
from engram_memory.engine.ports.store import SealedBody, WrappedKey
from engram_memory.engine.recall.text import tokenizer_id
from engram_memory.stores.postgres.roles import VAULT_FUNCTIONS, VAULT_GRANTS, grant
from engram_memory.stores.postgres.store import PostgresStore
from engram_memory.stores.postgres.vault import PostgresKeyVault
from tests.stores.builders import (
    SCOPE_A,
    SCOPE_B,
    audit,
    candidate,
    confirmation,
    event,
    fields,
    idempotency,
    record,
)
from tests.support.postgres import APP_ROLE, OWNER_ROLE, PostgresCluster

TOKENIZER_ID = tokenizer_id()

# Every table with a tenant column, and the column that tells rows apart.
STORE_TABLES = {
    "scopes": "workspace",
    "journal": "event_id",
    "candidates": "candidate_id",
    "records": "record_id",
    "sealed_bodies": "owner_id",
    "lexical_index": "rid",
    "lexical_postings": "term",
    "lexical_terms": "term",
    "record_vectors": "rid",
    "tombstones": "payload_digest",
    "record_families": "family_key",
    "idempotency": "idem_key",
    "confirmations": "confirmation_id",
    "audit_log": "audit_id",
}
VAULT_TABLES = {"data_keys": "owner_id", "shredded": "owner_id"}


def _fill_store(store: PostgresStore) -> None:
    """One row of every kind for tenant A and for tenant B, written by the owner through the port."""
    for scope, suffix in ((SCOPE_A, "a"), (SCOPE_B, "b")):
        with store.write() as tx:
            event(tx, scope, journal.CANDIDATE_CAPTURED, candidate_id=f"cand_{suffix}")
            tx.insert_candidate(candidate(scope, f"cand_{suffix}"))
            tx.insert_record(record(scope, f"mem_{suffix}"))
            tx.index_record(scope, f"mem_{suffix}", fields(primary=f"shared word{suffix}"), tokenizer=TOKENIZER_ID)
            tx.put_vector(scope, f"mem_{suffix}", "model-1", b"\x00" * 8, "shared")
            tx.put_body(scope, f"mem_{suffix}", SealedBody(b"n" * 12, b"secret-" + suffix.encode()))
            tx.add_tombstone(scope, [f"sha256:{suffix}"], 1)
            tx.add_record_families(scope, f"mem_{suffix}", [f"fam1:{suffix}"])
            tx.put_idempotency(idempotency(scope, f"key-00000000000000{suffix}"))
            tx.insert_confirmation(confirmation(scope, f"conf_{suffix}"))
            tx.append_audit(audit(f"aud_{suffix}", 1, scope))


def _as_runtime(cluster: PostgresCluster, database: str) -> psycopg.Connection[tuple[object, ...]]:
    with cluster.connect(OWNER_ROLE, database) as owner:
        owner.execute(sql.SQL("GRANT ALL ON ALL TABLES IN SCHEMA public TO {}").format(sql.Identifier(APP_ROLE)))
    return psycopg.connect(cluster.url(APP_ROLE, database))  # not autocommit: one transaction per test step


@pytest.fixture
def database(postgres_cluster: PostgresCluster) -> Iterator[str]:
    name = postgres_cluster.new_database()
    store = PostgresStore(postgres_cluster.url(OWNER_ROLE, name))
    try:
        _fill_store(store)
    finally:
        store.close()
    yield name


@pytest.fixture
def vault_database(postgres_cluster: PostgresCluster) -> str:
    name = postgres_cluster.new_database("engram_keys")
    vault = PostgresKeyVault(postgres_cluster.url(OWNER_ROLE, name))
    try:
        for scope, suffix in ((SCOPE_A, "a"), (SCOPE_B, "b")):
            vault.put(scope, f"mem_{suffix}", WrappedKey("kek-1", b"wrapped-" + suffix.encode()), 1)
            vault.put(scope, f"gone_{suffix}", WrappedKey("kek-1", b"w"), 1)
        vault.destroy(["gone_a", "gone_b"], 2)
    finally:
        vault.close()
    return name


def _tenant(db: psycopg.Connection[tuple[object, ...]], tenant: str | None) -> None:
    if tenant is not None:
        db.execute("SELECT set_config('app.tenant', %s, true)", (tenant,))


def _tenants_seen(db: psycopg.Connection[tuple[object, ...]], table: str) -> list[str]:
    rows = db.execute(sql.SQL("SELECT DISTINCT tenant FROM {} ORDER BY 1").format(sql.Identifier(table))).fetchall()
    return [str(row[0]) for row in rows]


def test_every_table_with_a_tenant_column_is_checked_here(postgres_cluster: PostgresCluster, database: str) -> None:
    """A table added later with tenant rows joins the checks below, or this fails."""
    with postgres_cluster.connect(OWNER_ROLE, database) as owner:
        rows = owner.execute(
            "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public'"
            " AND column_name = 'tenant' ORDER BY 1"
        ).fetchall()
    assert {str(row[0]) for row in rows} == set(STORE_TABLES)


def test_runtime_role_under_tenant_a_reads_no_row_of_tenant_b_in_any_table(
    postgres_cluster: PostgresCluster, database: str, vault_database: str
) -> None:
    for name, tables in ((database, STORE_TABLES), (vault_database, VAULT_TABLES)):
        with _as_runtime(postgres_cluster, name) as db:
            for table in tables:
                with db.transaction():
                    _tenant(db, "tenant-a")
                    assert _tenants_seen(db, table) == ["tenant-a"], table
                    hidden = db.execute(
                        sql.SQL("SELECT count(*) FROM {} WHERE tenant = 'tenant-b'").format(sql.Identifier(table))
                    ).fetchone()
                    assert hidden == (0,), table


def test_runtime_role_with_no_tenant_named_reads_nothing(
    postgres_cluster: PostgresCluster, database: str, vault_database: str
) -> None:
    for name, tables in ((database, STORE_TABLES), (vault_database, VAULT_TABLES)):
        with _as_runtime(postgres_cluster, name) as db:
            for table in tables:
                with db.transaction():
                    assert _tenants_seen(db, table) == [], table
            # A transaction-local setting that ended reads as '' afterwards: still nobody's rows.
            with db.transaction():
                _tenant(db, "tenant-a")
            with db.transaction():
                assert _tenants_seen(db, next(iter(tables))) == []


# A complete row of tenant B for every table: what a runtime process would write if its scoping failed.
INSERTS_FOR_B = {
    "scopes": "INSERT INTO scopes (tenant, workspace, head_cursor, head_digest, records_cursor)"
    " VALUES ('tenant-b', 'w9', 1, 'd', 0)",
    "journal": "INSERT INTO journal VALUES ('tenant-b', 'w9', 1, 'evt_x', 'k', 1, '{}', 'p', 'd', 0)",
    "candidates": "INSERT INTO candidates (candidate_id, tenant, workspace, state, payload_digest, evidence_digest,"
    " principal, agent_id, session, captured_at_ms, capture_cursor, size_bytes, citation_count, has_attestation,"
    " secret_categories) VALUES ('cand_x', 'tenant-b', 'w', 'pending', 'd', 'e', 'p', 'a', 's', 1, 1, 1, 1, 0, '[]')",
    "records": "INSERT INTO records (record_id, tenant, workspace, candidate_id, state, payload_digest, valid_from_ms,"
    " admitted_at_ms, state_cursor, principal, agent_id, session, captured_at_ms)"
    " VALUES ('mem_x', 'tenant-b', 'w', 'c', 'accepted_current', 'd', 1, 1, 1, 'p', 'a', 's', 1)",
    "sealed_bodies": "INSERT INTO sealed_bodies VALUES ('mem_x', 'tenant-b', 'w', 'n', 'c')",
    "lexical_index": "INSERT INTO lexical_index (rid, tenant, workspace, scope_token, f_primary, f_decision,"
    " f_evidence, f_context, f_citations) VALUES (999, 'tenant-b', 'w', 's', 'x', '', '', '', '')",
    "lexical_postings": "INSERT INTO lexical_postings VALUES ('tenant-b', 'w', 'x', -1, 999)",
    "lexical_terms": "INSERT INTO lexical_terms VALUES ('tenant-b', 'w', 'x', 1)",
    "record_vectors": "INSERT INTO record_vectors VALUES (999, 'tenant-b', 'w', 'm', 'v', 's')",
    "tombstones": "INSERT INTO tombstones VALUES ('tenant-b', 'w', 'sha256:x', 1)",
    "record_families": "INSERT INTO record_families VALUES ('tenant-b', 'w', 'fam1:x', 'mem_x')",
    "idempotency": "INSERT INTO idempotency VALUES ('tenant-b', 'w', 'p', 'k', 't', 'o', 't', '{}', 1)",
    "confirmations": "INSERT INTO confirmations (confirmation_id, tenant, workspace, principal, agent_id, session,"
    " tool, target, operation_digest, summary, status, requested_at_ms)"
    " VALUES ('conf_x', 'tenant-b', 'w', 'p', 'a', 's', 't', 'x', 'o', '{}', 'requested', 1)",
    "audit_log": "INSERT INTO audit_log (audit_id, at_ms, tool, outcome, tenant)"
    " VALUES ('aud_x', 1, 't', 'ok', 'tenant-b')",
}


def test_runtime_role_under_tenant_a_cannot_insert_rows_of_tenant_b(
    postgres_cluster: PostgresCluster, database: str
) -> None:
    assert set(INSERTS_FOR_B) == set(STORE_TABLES)
    with _as_runtime(postgres_cluster, database) as db:
        for statement in INSERTS_FOR_B.values():
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"), db.transaction():
                _tenant(db, "tenant-a")
                db.execute(statement)  # type: ignore[call-overload]
            # The same row for the tenant the transaction names goes in: only the tenant was wrong.
            with db.transaction():
                _tenant(db, "tenant-b")
                db.execute(statement)  # type: ignore[call-overload]
                raise psycopg.Rollback()


def test_runtime_role_under_tenant_a_cannot_update_or_delete_rows_of_tenant_b(
    postgres_cluster: PostgresCluster, database: str
) -> None:
    with _as_runtime(postgres_cluster, database) as db:
        for table in STORE_TABLES:
            if table == "journal":
                continue  # append-only for everyone: the trigger refuses any update
            with db.transaction():
                _tenant(db, "tenant-a")
                touched = db.execute(
                    sql.SQL("UPDATE {} SET tenant = tenant WHERE tenant = 'tenant-b'").format(sql.Identifier(table))
                ).rowcount
                deleted = db.execute(
                    sql.SQL("DELETE FROM {} WHERE tenant = 'tenant-b'").format(sql.Identifier(table))
                ).rowcount
                assert (touched, deleted) == (0, 0), table
            move = sql.SQL("UPDATE {} SET tenant = 'tenant-b'").format(sql.Identifier(table))
            if table == "audit_log":  # no policy lets anyone update an audit row: nothing to move
                with db.transaction():
                    _tenant(db, "tenant-a")
                    assert db.execute(move).rowcount == 0
                continue
            with pytest.raises(psycopg.errors.InsufficientPrivilege), db.transaction():
                _tenant(db, "tenant-a")
                db.execute(move)
    with postgres_cluster.connect(OWNER_ROLE, database) as owner:
        for table in STORE_TABLES:
            assert _tenants_seen(owner, table) == ["tenant-a", "tenant-b"], table


def test_owner_role_sees_every_tenant(postgres_cluster: PostgresCluster, database: str, vault_database: str) -> None:
    for name, tables in ((database, STORE_TABLES), (vault_database, VAULT_TABLES)):
        with postgres_cluster.connect(OWNER_ROLE, name) as owner:
            for table in tables:
                assert _tenants_seen(owner, table) == ["tenant-a", "tenant-b"], table


def test_runtime_role_destroys_keys_by_id_without_reading_other_tenants(
    postgres_cluster: PostgresCluster, vault_database: str
) -> None:
    with postgres_cluster.connect(OWNER_ROLE, vault_database) as owner:
        grant(owner, APP_ROLE, VAULT_GRANTS, VAULT_FUNCTIONS)
    vault = PostgresKeyVault(postgres_cluster.url(APP_ROLE, vault_database), run_migrations=False)
    try:
        assert vault.get(SCOPE_A, "mem_a") == WrappedKey("kek-1", b"wrapped-a")
        assert vault.get(SCOPE_A, "mem_b") is None and vault.get(SCOPE_B, "mem_a") is None
        assert vault.owners_created_before(10) == []  # the host's cross-tenant sweep is the owner's
        assert vault.destroy(["mem_b"], 3)
        assert not vault.checkpoint()  # only the owner may VACUUM
    finally:
        vault.close()
    with postgres_cluster.connect(OWNER_ROLE, vault_database) as owner:
        assert owner.execute("SELECT owner_id FROM data_keys ORDER BY 1").fetchall() == [("mem_a",)]
        assert owner.execute("SELECT count(*) FROM shredded WHERE owner_id = 'mem_b'").fetchone() == (1,)
