"""The journal: hash-chained, dense, append-only, and folding back into exactly the stored state."""

from __future__ import annotations

import dataclasses
import sqlite3

import psycopg
import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine import journal
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Scope
from engram_memory.host.compose import open_store
from engram_memory.host.settings import HostPaths
from tests.support.homes import journal_of
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key
from tests.support.raw import raw_store, rows

SCOPE = Scope(tenant="tenant-a", workspace="workspace-1")


def _session(agent: InProcessAgent, steered: Engine) -> None:
    kept = agent.remember("Deploys need two approvals.")
    agent.remember("Hotfix branches are cut from the release tag.")
    rejected = agent.capture("token: ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")
    agent.admit(rejected["candidate_id"])
    withdrawn = agent.capture("A draft that goes away.")
    args = {"candidate_id": withdrawn["candidate_id"], "idempotency_key": unique_key("w"), "reason_ref": "r"}
    agent.error_code("engram_memory_withdraw", args)
    steered.approve_confirmation(steered.confirmations()[0][0].confirmation_id, decided_by="h", ttl_ms=60_000)
    agent.value("engram_memory_withdraw", args)
    forget = {"record_id": kept, "idempotency_key": unique_key("f"), "reason_ref": "r"}
    agent.error_code("engram_memory_forget", forget)
    steered.approve_confirmation(steered.confirmations()[0][0].confirmation_id, decided_by="h", ttl_ms=60_000)
    agent.value("engram_memory_forget", forget)


def test_fold_of_journal_reproduces_materialised_state(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    _session(agent, steered)
    events, head = journal_of(paths, SCOPE)
    assert journal.verify_chain(SCOPE, events) == head
    folded = journal.fold(events)
    candidates = dict(rows(paths, "SELECT candidate_id, state FROM candidates"))
    records = dict(rows(paths, "SELECT record_id, state FROM records"))
    assert folded.candidates == candidates
    assert folded.records == records
    assert sorted(set(candidates.values())) == ["accepted_current", "rejected", "withdrawn"]
    assert "tombstoned" in records.values()


def test_journal_cursors_are_dense_from_one(agent: InProcessAgent, steered: Engine, paths: HostPaths) -> None:
    _session(agent, steered)
    cursors = [row[0] for row in rows(paths, "SELECT cursor FROM journal ORDER BY cursor")]
    assert cursors == list(range(1, len(cursors) + 1))


def test_journal_holds_no_memory_text(agent: InProcessAgent, paths: HostPaths) -> None:
    agent.remember("Quarterly access reviews cover every production role.")
    bodies = " ".join(row[0] for row in rows(paths, "SELECT body FROM journal"))
    assert "Quarterly" not in bodies and "access" not in bodies


def test_journal_rejects_update_and_delete(agent: InProcessAgent, paths: HostPaths) -> None:
    agent.capture("Something to journal.")
    refusals = (sqlite3.IntegrityError, psycopg.Error)
    with raw_store(paths) as db:
        with pytest.raises(refusals, match="append-only"):
            db.execute("UPDATE journal SET kind = 'x'")
        with pytest.raises(refusals, match="append-only"):
            db.execute("DELETE FROM journal")
        if db.is_postgres:  # SQLite has no TRUNCATE; PostgreSQL's would bypass the row triggers
            with pytest.raises(refusals, match="append-only"):
                db.execute("TRUNCATE journal")
        assert db.count("journal") == 1


def _events(paths: HostPaths) -> list[journal.JournalEvent]:
    return journal_of(paths, SCOPE)[0]


def test_verify_chain_detects_a_changed_event(agent: InProcessAgent, paths: HostPaths) -> None:
    agent.remember("One.")
    agent.remember("Two.")
    events = _events(paths)
    body = dict(events[1].body)
    body["at"] = body["at"] + 1
    tampered = [events[0], dataclasses.replace(events[1], body=body), *events[2:]]
    with pytest.raises(ContractError) as caught:
        journal.verify_chain(SCOPE, tampered)
    assert caught.value.code is ErrorCode.JOURNAL_CORRUPT


def test_verify_chain_detects_a_gap(agent: InProcessAgent, paths: HostPaths) -> None:
    agent.remember("One.")
    agent.remember("Two.")
    events = _events(paths)
    with pytest.raises(ContractError) as caught:
        journal.verify_chain(SCOPE, [events[0], *events[2:]])
    assert caught.value.code is ErrorCode.CURSOR_GAP


def test_verify_chain_detects_a_reordered_link(agent: InProcessAgent, paths: HostPaths) -> None:
    agent.remember("One.")
    events = _events(paths)
    relinked = dataclasses.replace(events[1], prev_digest=journal.genesis_digest(SCOPE))
    with pytest.raises(ContractError) as caught:
        journal.verify_chain(SCOPE, [events[0], relinked])
    assert caught.value.code is ErrorCode.JOURNAL_CORRUPT


def test_store_refuses_a_second_event_at_the_same_cursor(agent: InProcessAgent, paths: HostPaths) -> None:
    agent.capture("First event.")
    store = open_store(paths)
    with pytest.raises(ContractError) as caught, store.write() as tx:
        tx.append_event(
            journal.next_event(
                SCOPE,
                journal.initial_head(SCOPE),
                kind="candidate.captured",
                at_ms=1,
                actor={},
                data={"candidate_id": "cand_x"},
            )
        )
    store.close()
    assert caught.value.code is ErrorCode.STORE_UNAVAILABLE
