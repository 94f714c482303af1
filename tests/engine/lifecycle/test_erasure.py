"""Forget and withdraw erase for real: no byte of the text survives in the store at rest.

SQLite: no file under the store folder holds it. PostgreSQL: no row of any table holds it, and once the
owner has run the physical erasure the index table lives in new files (the old pages held its tokens);
agent calls run as the runtime role, which may not VACUUM, so the owner finishes what they start.
"""

from __future__ import annotations

import hashlib
import secrets
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engram_memory.engine.admission import review
from engram_memory.engine.engine import Engine
from engram_memory.host.compose import store_settings
from engram_memory.host.settings import HostPaths
from engram_memory.stores.postgres.store import ERASURE_DELAY_S
from engram_memory.stores.sqlite.store import SQLiteStore
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine, steered_engines
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key
from tests.support.raw import raw_store, readable_in_store, relation_file


def _sqlite_bytes(paths: HostPaths) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(Path(paths.store_dir).rglob("*")) if path.is_file())


def _approve(engine: Engine) -> None:
    engine.approve_confirmation(engine.confirmations()[0][0].confirmation_id, decided_by="host:test", ttl_ms=60_000)


def _forget(agent: InProcessAgent, steered: Engine, record_id: str) -> None:
    args = {"record_id": record_id, "idempotency_key": unique_key("f"), "reason_ref": "r"}
    agent.error_code("engram_memory_forget", args)
    _approve(steered)
    agent.value("engram_memory_forget", args)


def test_forget_erases_plaintext_and_tokens_from_the_store_at_rest(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    marker = "zanzibarquux" + secrets.token_hex(4)
    record_id = agent.remember(f"The {marker} cluster keeps its quorum across zones.", context=f"{marker} context")
    agent.remember("An unrelated neighbour record keeps the index busy.")
    assert agent.found_ids(marker)[:1] == [record_id]
    assert readable_in_store(paths, [marker]) != []
    postgres = store_settings(paths).is_postgres
    index_file = relation_file(paths, "lexical_index") if postgres else ""
    _forget(agent, steered, record_id)
    if postgres:  # the index tables' rewrite waits to be compacted with later forgets (ERASURE_DELAY_S)
        assert relation_file(paths, "lexical_index") == index_file
    assert steered.erase_now()  # the documented step (`engram-memory erase`): a checkpoint on SQLite
    assert readable_in_store(paths, [marker]) == []
    if postgres:
        assert relation_file(paths, "lexical_index") != index_file
        with raw_store(paths) as db:
            assert db.count("erasure_requests") == 0
    assert record_id not in agent.found_ids(marker)
    assert agent.found_ids("unrelated neighbour") != []


def test_forget_erases_plaintext_from_every_sqlite_file(sqlite_paths: HostPaths) -> None:
    paths = sqlite_paths
    with steered_engine(paths, clock=ManualClock()) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        marker = "zanzibarquux" + secrets.token_hex(4)
        record_id = agent.remember(f"The {marker} cluster keeps its quorum.", context=f"{marker} context")
        agent.remember("An unrelated neighbour record keeps the index busy.")
        assert marker.encode() in _sqlite_bytes(paths)
        _forget(agent, engine, record_id)
        assert marker.encode() not in _sqlite_bytes(paths).lower()


def test_withdraw_destroys_the_candidate_body(agent: InProcessAgent, steered: Engine, paths: HostPaths) -> None:
    candidate = agent.capture("A draft about the osprey migration.")["candidate_id"]
    args = {"candidate_id": candidate, "idempotency_key": unique_key("w"), "reason_ref": "r"}
    agent.error_code("engram_memory_withdraw", args)
    _approve(steered)
    value = agent.value("engram_memory_withdraw", args)
    assert value["key_destruction"] == "complete"
    assert value["receipt"]["from_state"] == "pending" and value["receipt"]["to_state"] == "withdrawn"
    with raw_store(paths) as db:
        assert db.count("sealed_bodies", "owner_id = ?", (candidate,)) == 0
        assert db.rows("SELECT state FROM candidates WHERE candidate_id = ?", (candidate,)) == [("withdrawn",)]
    assert steered.deps.vault.shredded([candidate]) == {candidate}


def test_forgotten_content_recaptured_waits_for_a_human(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    text = "The heron rollout was cancelled."
    record_id = agent.remember(text)
    _forget(agent, steered, record_id)
    policy = paths.policy.read_text()
    paths.policy.write_text(policy.replace("require_attestation = false", "require_attestation = true"))
    refused = agent.capture(text)
    assert agent.admit(refused["candidate_id"])["status"] == "rejected"
    paths.policy.write_text(policy)
    again = agent.capture(text)
    assert again["status"] == "committed_pending"
    assert agent.admit(again["candidate_id"])["status"] == "pending_adjudication"
    assert agent.found_ids("heron rollout") == []


GUARDED = "The heron rollout was cancelled after the 운영팀 review of 資料庫 backups."
# What a person would call the same content: every one of these must wait for a human.
SAME_CONTENT: list[tuple[str, dict[str, Any]]] = [
    (GUARDED, {"valid_from_ms": 1_600_000_000_000}),
    (GUARDED, {"source_ref": "doc:elsewhere"}),
    (GUARDED + " ", {}),
    ("  the HERON rollout   was cancelled, after the 운영팀 review of 资料库 backups!", {}),
    (GUARDED, {"context": "A new line of context around the old statement."}),
    ("A new statement.", {"context": GUARDED}),
    ("The her\u200bon roll\u00adout was can\u2060celled after the 운\u200d영팀 review of 資料庫 backups.", {}),
]


@pytest.mark.parametrize(
    ("text", "options"),
    SAME_CONTENT,
    ids=["valid-time", "source", "space", "fold", "added", "moved", "invisible-splits"],
)
def test_forgotten_content_in_another_form_waits_for_a_human(
    agent: InProcessAgent, steered: Engine, text: str, options: dict[str, Any]
) -> None:
    _forget(agent, steered, agent.remember(GUARDED))
    candidate = agent.capture(text, **options)["candidate_id"]
    assert agent.admit(candidate)["status"] == "pending_adjudication"
    [row] = [row for row in review.review_queue(steered.deps) if row.candidate_id == candidate]
    assert row.review_reasons == ("tombstone_guard",)


def test_other_content_is_accepted_beside_a_tombstone(agent: InProcessAgent, steered: Engine) -> None:
    _forget(agent, steered, agent.remember(GUARDED, context="The context of the forgotten memory."))
    assert agent.admit(agent.capture("The heron rollout went ahead.")["candidate_id"])["status"] == "accepted"
    # The forgotten record's context was not what was forgotten: it may come back as a statement.
    assert agent.admit(agent.capture("The context of the forgotten memory.")["candidate_id"])["status"] == "accepted"


def test_the_guard_keeps_only_keyed_fingerprints(agent: InProcessAgent, steered: Engine, paths: HostPaths) -> None:
    record_id = agent.remember(GUARDED)
    with raw_store(paths) as db:
        [(payload_digest,)] = db.rows("SELECT payload_digest FROM records WHERE record_id = ?", (record_id,))
    _forget(agent, steered, record_id)
    with raw_store(paths) as db:
        kept = [row[0] for row in db.rows("SELECT payload_digest FROM tombstones")]
    assert kept and all(value.startswith("fp1:") and len(value) == 68 for value in kept)
    assert payload_digest not in kept and hashlib.sha256(GUARDED.encode()).hexdigest() not in "".join(kept)


def test_a_tombstone_written_before_the_keyed_guard_still_holds(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    record_id = agent.remember(GUARDED)
    _forget(agent, steered, record_id)
    with raw_store(paths) as db:  # as the first guard wrote it: the plain payload digest alone
        [(payload_digest,)] = db.rows("SELECT payload_digest FROM records WHERE record_id = ?", (record_id,))
        db.execute("DELETE FROM tombstones")
        db.execute(
            "INSERT INTO tombstones (tenant, workspace, payload_digest, at_ms) SELECT tenant, workspace, ?, 1"
            " FROM records WHERE record_id = ?",
            (payload_digest, record_id),
        )
    assert agent.admit(agent.capture(GUARDED)["candidate_id"])["status"] == "pending_adjudication"


def test_forget_of_a_tombstoned_record_is_already_terminal(agent: InProcessAgent, steered: Engine) -> None:
    record_id = agent.remember("Short-lived fact.")
    _forget(agent, steered, record_id)
    again = {"record_id": record_id, "idempotency_key": unique_key("f"), "reason_ref": "r"}
    assert agent.error_code("engram_memory_forget", again) == "ALREADY_TERMINAL"
    assert agent.get(record_id)["error"]["code"] == "NOT_FOUND"


def test_erasure_held_back_by_a_sqlite_reader_completes_after_the_next_write(sqlite_paths: HostPaths) -> None:
    import sqlite3

    paths = sqlite_paths
    # A short busy timeout: the checkpoint gives up on the reader at once instead of after ten seconds.
    store = SQLiteStore(paths.sqlite_file, busy_timeout_ms=200)
    with steered_engine(paths, clock=ManualClock(), store=store) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        marker = "quokkaflux" + secrets.token_hex(4)
        record_id = agent.remember(f"The {marker} job runs hourly.")
        reader = sqlite3.connect(paths.sqlite_file, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM records").fetchone()
        _forget(agent, engine, record_id)
        assert agent.found_ids(marker) == []
        assert marker.encode() in _sqlite_bytes(paths).lower()  # the reader's snapshot still pins the old pages
        reader.execute("ROLLBACK")
        reader.close()
        agent.capture("Any later write lets the held-back checkpoint finish.")
        assert marker.encode() not in _sqlite_bytes(paths).lower()


def test_erasure_held_back_by_an_old_postgres_snapshot_completes_at_the_next_due_housekeeping(
    postgres_paths: HostPaths,
) -> None:
    """The PostgreSQL twin of the SQLite reader test: VACUUM cannot drop rows an open snapshot still sees."""
    paths = postgres_paths
    with steered_engines(paths, clock=ManualClock()) as (served, steered):
        agent = InProcessAgent(served, bind(paths).binding)
        marker = "quokkaflux" + secrets.token_hex(4)
        record_id = agent.remember(f"The {marker} job runs hourly.")
        index_file = relation_file(paths, "lexical_index")
        with psycopg.connect(store_settings(paths).store, autocommit=True) as reader:
            reader.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            reader.execute("SELECT count(*) FROM lexical_index").fetchone()
            _forget(agent, steered, record_id)
            assert agent.found_ids(marker) == []
            assert not steered.deps.store.erase_physically(now=True)  # the old snapshot still sees the index row
            assert relation_file(paths, "lexical_index") == index_file
            reader.execute("ROLLBACK")
        InProcessAgent(steered, bind(paths).binding).capture("A later write does not rewrite the tables itself.")
        assert relation_file(paths, "lexical_index") == index_file
        with raw_store(paths) as db:  # the request ages past the compaction delay, as on the server's clock
            db.execute(f"UPDATE erasure_requests SET requested_at = now() - interval '{ERASURE_DELAY_S + 1} seconds'")
        steered.housekeep()  # what serve runs every minute
        assert relation_file(paths, "lexical_index") != index_file
        with raw_store(paths) as db:
            assert db.count("erasure_requests") == 0
        assert readable_in_store(paths, [marker]) == []
