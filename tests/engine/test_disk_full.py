"""A full disk, for real: SQLite's own SQLITE_FULL, raised by `PRAGMA max_page_count` on the store's or the
vault's connection, exactly as when the file system runs out of room for the next page.

Writes answer STORE_UNAVAILABLE (retriable) and change nothing; reads go on; once there is room
again the same calls, sent with the same keys, apply exactly once, and `verify` finds nothing wrong.
(PostgreSQL's disk cannot be filled from a test; its failed commits are simulated in test_faults.py.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from engram_memory.engine.engine import Engine
from engram_memory.engine.verify import verify_store
from engram_memory.host.settings import HostPaths
from tests.support.homes import bind, engine_for
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE, capture_args, unique_key
from tests.support.raw import raw_store

UNLIMITED = 1_073_741_823


@contextmanager
def full(connection: sqlite3.Connection) -> Iterator[None]:
    """The file may not grow by a single page until the block ends."""
    pages = connection.execute("PRAGMA page_count").fetchone()[0]
    connection.execute(f"PRAGMA max_page_count = {pages}")
    try:
        yield
    finally:
        connection.execute(f"PRAGMA max_page_count = {UNLIMITED}")


def _rows(paths: HostPaths) -> dict[str, int]:
    with raw_store(paths) as db:
        return {table: db.count(table) for table in ("journal", "candidates", "records", "idempotency")}


def _code(envelope: dict[str, Any]) -> str:
    return "ok" if envelope["ok"] else f"{envelope['error']['code']}/{envelope['error']['retriable']}"


def _store_connection(engine: Engine) -> sqlite3.Connection:
    connection: sqlite3.Connection = engine.deps.store._db  # type: ignore[attr-defined]
    return connection


def _vault_connection(engine: Engine) -> sqlite3.Connection:
    connection: sqlite3.Connection = engine.deps.vault._db  # type: ignore[attr-defined]
    return connection


def test_a_full_store_refuses_writes_retriably_keeps_reads_and_retries_apply_once(sqlite_paths: HostPaths) -> None:
    paths = sqlite_paths
    binding = bind(paths).binding
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, binding)
        kept = agent.remember("Cranes are inspected before every harbour shift.")
        before = _rows(paths)
        # Large enough that each needs new pages once the free ones are used up.
        captures = [capture_args(f"Note {n}: " + "crane log entry " * 400, key=unique_key("c")) for n in range(24)]
        with full(_store_connection(engine)):
            answers = [_code(engine.handle(binding, "engram_memory_capture", args)) for args in captures]
            assert agent.found_ids("harbour shift") == [kept]  # reads go on
        assert "STORE_UNAVAILABLE/True" in answers and set(answers) <= {"ok", "STORE_UNAVAILABLE/True"}, answers
        taken = answers.count("ok")
        assert _rows(paths)["candidates"] == before["candidates"] + taken  # a refused call wrote nothing
        for args, answer in zip(captures, answers, strict=True):
            value = agent.value("engram_memory_capture", args)
            assert value["status"] == ("duplicate_exact" if answer == "ok" else "committed_pending")
        again = [agent.value("engram_memory_capture", args)["status"] for args in captures]
        assert again == ["duplicate_exact"] * len(captures)  # each applied exactly once
        assert _rows(paths)["candidates"] == before["candidates"] + len(captures)
        assert verify_store(engine.deps, full=True).first is None


def test_a_full_vault_refuses_captures_retriably_and_leaves_no_store_row(sqlite_paths: HostPaths) -> None:
    paths = sqlite_paths
    binding = bind(paths).binding
    with engine_for(paths) as engine:
        before = _rows(paths)
        captures = [capture_args(f"Vault-full note {n}.", key=unique_key("v")) for n in range(80)]
        with full(_vault_connection(engine)):
            answers = [_code(engine.handle(binding, "engram_memory_capture", args)) for args in captures]
        assert set(answers) == {"ok", "STORE_UNAVAILABLE/True"}, answers  # the room left, then none
        refused = [args for args, code in zip(captures, answers, strict=True) if code != "ok"]
        assert _rows(paths)["candidates"] == before["candidates"] + len(captures) - len(refused)
        for args in refused:
            assert engine.handle(binding, "engram_memory_capture", args)["ok"]
        search = {"query": "vault-full note", "purpose_ref": PURPOSE}
        assert engine.handle(binding, "engram_memory_search", search)["ok"]
        assert verify_store(engine.deps, full=True).first is None
