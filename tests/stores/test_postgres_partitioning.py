"""The scale-out shape (issue 17, part 4): every tenant table is keyed by tenant first, so each can be
hash-partitioned by tenant with PostgreSQL's declarative partitioning, as a sharded deployment would.

The store is filled through the engine (two tenants: captures, admissions, a forget, its confirmation
and tombstone), then each tenant table is copied into a table `PARTITION BY HASH (tenant)` made `LIKE`
it with every index and constraint: PostgreSQL refuses that for any unique key without the tenant.
"""

from __future__ import annotations

import re
from typing import Any

import psycopg

from engram_memory.host.compose import store_settings
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key

PARTITIONS = 4
HOST_TABLES = {"audit_log", "erasure_requests", "schema_migrations"}  # the host's own: no tenant key


def _fill(paths: HostPaths) -> None:
    with steered_engine(paths, clock=ManualClock()) as engine:
        for tenant in ("tenant-a", "tenant-b"):
            agent = InProcessAgent(engine, bind(paths, tenant=tenant).binding)
            kept = agent.remember(f"The {tenant} relay restarts at dawn.")
            agent.remember(f"The {tenant} backups run at noon.")
            agent.capture(f"The {tenant} note still waits for admission.")
            forget = {"record_id": kept, "idempotency_key": unique_key("f"), "reason_ref": "r:1"}
            agent.error_code("engram_memory_forget", forget)
            approval = next(row for row, _ in engine.confirmations() if row.target == kept)
            engine.approve_confirmation(approval.confirmation_id, decided_by="host:test", ttl_ms=60_000)
            agent.value("engram_memory_forget", forget)


def _tenant_tables(db: psycopg.Connection[Any]) -> list[str]:
    rows = db.execute(
        "SELECT table_name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = 'tenant'"
        " ORDER BY table_name"
    ).fetchall()
    return [str(row[0]) for row in rows if row[0] not in HOST_TABLES]


def test_every_unique_key_of_a_tenant_table_starts_with_the_tenant(postgres_paths: HostPaths) -> None:
    with psycopg.connect(store_settings(postgres_paths).store, autocommit=True) as db:
        tables = _tenant_tables(db)
        assert {"candidates", "records", "sealed_bodies", "lexical_index", "journal", "idempotency"} <= set(tables)
        keys = db.execute(
            "SELECT c.relname, i.relname, a.attname FROM pg_index AS x"
            " JOIN pg_class AS c ON c.oid = x.indrelid JOIN pg_class AS i ON i.oid = x.indexrelid"
            " JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum = x.indkey[0]"
            " WHERE x.indisunique AND c.relname = ANY (%s)",
            (tables,),
        ).fetchall()
    assert {table for table, _, _ in keys} == set(tables)  # every tenant table has a key
    assert [(table, index) for table, index, first in keys if first != "tenant"] == []


def test_every_tenant_table_takes_hash_partitioning_by_tenant(postgres_paths: HostPaths) -> None:
    _fill(postgres_paths)
    with psycopg.connect(store_settings(postgres_paths).store, autocommit=True) as db:
        tables = _tenant_tables(db)
        for table in tables:
            copy = f"partitioned_{table}"
            db.execute(f"CREATE TABLE {copy} (LIKE {table} INCLUDING ALL) PARTITION BY HASH (tenant)")
            for remainder in range(PARTITIONS):
                db.execute(
                    f"CREATE TABLE {copy}_{remainder} PARTITION OF {copy}"
                    f" FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {remainder})"
                )
            columns = ", ".join(
                str(row[0])
                for row in db.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = 'public'"
                    " AND table_name = %s AND is_generated = 'NEVER' ORDER BY ordinal_position",
                    (table,),
                ).fetchall()
            )
            db.execute(f"INSERT INTO {copy} ({columns}) SELECT {columns} FROM {table}")
            original = db.execute(f"SELECT tenant, count(*) FROM {table} GROUP BY tenant ORDER BY tenant").fetchall()
            copied = db.execute(f"SELECT tenant, count(*) FROM {copy} GROUP BY tenant ORDER BY tenant").fetchall()
            assert copied == original, table
            plan = "\n".join(
                str(row[0]) for row in db.execute(f"EXPLAIN SELECT * FROM {copy} WHERE tenant = 'tenant-a'").fetchall()
            )
            scanned = set(re.findall(rf"\bon {copy}_(\d+)\b", plan))
            assert len(scanned) == 1, (table, plan)  # one tenant's rows live in one partition
        filled = db.execute("SELECT count(*) FROM partitioned_candidates").fetchone()
    assert filled is not None and filled[0] == 6
