"""Forget and withdraw erase for real: no byte of the text survives in any file under the store folder."""

from __future__ import annotations

import secrets
from pathlib import Path

from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key


def _store_bytes(paths: HostPaths) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(Path(paths.store_dir).rglob("*")) if path.is_file())


def _approve(engine: Engine) -> None:
    engine.approve_confirmation(engine.confirmations()[0][0].confirmation_id, decided_by="host:test", ttl_ms=60_000)


def test_forget_erases_plaintext_and_tokens_from_every_store_file(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    marker = "zanzibarquux" + secrets.token_hex(4)
    record_id = agent.remember(f"The {marker} cluster keeps its quorum across zones.", context=f"{marker} context")
    agent.remember("An unrelated neighbour record keeps the index busy.")
    assert agent.found_ids(marker) == [record_id]
    assert marker.encode() in _store_bytes(paths)
    args = {"record_id": record_id, "idempotency_key": unique_key("f"), "reason_ref": "r"}
    agent.error_code("engram_memory_forget", args)
    _approve(steered)
    agent.value("engram_memory_forget", args)
    data = _store_bytes(paths).lower()
    assert marker.encode() not in data
    assert agent.found_ids(marker) == []
    assert agent.found_ids("unrelated neighbour") != []


def test_withdraw_destroys_the_candidate_body(agent: InProcessAgent, steered: Engine, paths: HostPaths) -> None:
    import sqlite3

    candidate = agent.capture("A draft about the osprey migration.")["candidate_id"]
    args = {"candidate_id": candidate, "idempotency_key": unique_key("w"), "reason_ref": "r"}
    agent.error_code("engram_memory_withdraw", args)
    _approve(steered)
    value = agent.value("engram_memory_withdraw", args)
    assert value["key_destruction"] == "complete"
    assert value["receipt"]["from_state"] == "pending" and value["receipt"]["to_state"] == "withdrawn"
    with sqlite3.connect(paths.sqlite_file) as db:
        assert db.execute("SELECT count(*) FROM sealed_bodies WHERE owner_id = ?", (candidate,)).fetchone() == (0,)
        assert db.execute("SELECT state FROM candidates WHERE candidate_id = ?", (candidate,)).fetchone() == (
            "withdrawn",
        )


def test_forgotten_content_recaptured_waits_for_a_human(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    text = "The heron rollout was cancelled."
    record_id = agent.remember(text)
    args = {"record_id": record_id, "idempotency_key": unique_key("f"), "reason_ref": "r"}
    agent.error_code("engram_memory_forget", args)
    _approve(steered)
    agent.value("engram_memory_forget", args)
    policy = paths.policy.read_text()
    paths.policy.write_text(policy.replace("require_attestation = false", "require_attestation = true"))
    refused = agent.capture(text)
    assert agent.admit(refused["candidate_id"])["status"] == "rejected"
    paths.policy.write_text(policy)
    again = agent.capture(text)
    assert again["status"] == "committed_pending"
    assert agent.admit(again["candidate_id"])["status"] == "pending_adjudication"
    assert agent.found_ids("heron rollout") == []


def test_forget_of_a_tombstoned_record_is_already_terminal(agent: InProcessAgent, steered: Engine) -> None:
    record_id = agent.remember("Short-lived fact.")
    args = {"record_id": record_id, "idempotency_key": unique_key("f"), "reason_ref": "r"}
    agent.error_code("engram_memory_forget", args)
    _approve(steered)
    agent.value("engram_memory_forget", args)
    again = {"record_id": record_id, "idempotency_key": unique_key("f"), "reason_ref": "r"}
    assert agent.error_code("engram_memory_forget", again) == "ALREADY_TERMINAL"
    assert agent.get(record_id)["error"]["code"] == "NOT_FOUND"


def test_erasure_held_back_by_a_reader_completes_after_the_next_write(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    import sqlite3

    marker = "quokkaflux" + secrets.token_hex(4)
    record_id = agent.remember(f"The {marker} job runs hourly.")
    reader = sqlite3.connect(paths.sqlite_file, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM records").fetchone()
    args = {"record_id": record_id, "idempotency_key": unique_key("f"), "reason_ref": "r"}
    agent.error_code("engram_memory_forget", args)
    _approve(steered)
    agent.value("engram_memory_forget", args)
    assert agent.found_ids(marker) == []
    assert marker.encode() in _store_bytes(paths).lower()  # the reader's snapshot still pins the old pages
    reader.execute("ROLLBACK")
    reader.close()
    agent.capture("Any later write lets the held-back checkpoint finish.")
    assert marker.encode() not in _store_bytes(paths).lower()
