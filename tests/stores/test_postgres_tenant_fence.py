"""A tenant moved away from a PostgreSQL store can no longer be written there, alone or in a shared commit
(stores/postgres/tenant_copy.py's fence); its other tenants are untouched, and lifting the fence undoes it."""

from __future__ import annotations

import psycopg

from engram_memory.engine.engine import AgentCall
from engram_memory.host.compose import open_engine
from engram_memory.host.settings import HostPaths, store_settings
from engram_memory.stores.postgres import tenant_copy
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import capture_args

CAPTURE = "engram_memory_capture"


def test_a_fenced_tenant_s_writes_are_refused_retriably_and_others_go_on(postgres_paths: HostPaths) -> None:
    ann = bind(postgres_paths, tenant="acme", principal="ann").binding
    bob = bind(postgres_paths, tenant="beta", principal="bob").binding
    with open_engine(postgres_paths, runtime=True, semantic=False) as engine:
        acme, beta = InProcessAgent(engine, ann), InProcessAgent(engine, bob)
        kept = acme.remember("The acme release is cut on Wednesdays.")
        with psycopg.connect(store_settings(postgres_paths).store, autocommit=True) as db:
            tenant_copy.fence(db, "acme", "east", 1)
        refused = acme.call(CAPTURE, capture_args("Another acme note."))
        assert refused["error"] == {
            "code": "STORE_UNAVAILABLE",
            "message": "The store is temporarily unavailable; retry.",
            "retriable": True,
        }
        grouped = engine.handle_group(
            [
                AgentCall(bob, CAPTURE, capture_args("A beta note.")),
                AgentCall(ann, CAPTURE, capture_args("An acme one.")),
            ]
        )
        assert [outcome["ok"] for outcome in grouped] == [True, False]  # type: ignore[index]
        beta.remember("The beta office moves in March.")
        assert acme.value("engram_memory_get", {"record_id": kept, "purpose_ref": "purpose:tests"})  # reads go on
        with psycopg.connect(store_settings(postgres_paths).store, autocommit=True) as db, db.transaction():
            tenant_copy.unfence(db, "acme")
        acme.remember("Another acme note.")
