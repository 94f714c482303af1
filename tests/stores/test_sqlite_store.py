"""The embedded store's own mechanisms: migrations and their ledger, what opening a store checks, the faults
it names from SQLite's result codes, and its statement tracer."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.ports.faults import StoreError, StoreFault
from engram_memory.engine.recall.text import tokenizer_id
from engram_memory.stores.sqlite.migrate import bundled, migrate
from engram_memory.stores.sqlite.store import SQLiteStore
from engram_memory.stores.sqlite.vault import SQLiteKeyVault
from tests.stores.builders import AT_MS, SCOPE_A, SCOPE_B, audit, event, fields, record

VERSIONS = [version for version, _, _ in bundled("migrations")]
READS = ("SELECT", "WITH")


def test_new_store_records_every_migration(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "s.db").close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        rows = db.execute("SELECT version, name, digest FROM schema_migrations ORDER BY version").fetchall()
        assert [row[0] for row in rows] == VERSIONS and len(VERSIONS) >= 2
        assert all(row[2].startswith("sha256:") for row in rows)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_reopening_a_store_applies_nothing_twice(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "s.db").close()
    SQLiteStore(tmp_path / "s.db").close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        assert db.execute("SELECT count(*) FROM schema_migrations").fetchone() == (len(VERSIONS),)


def test_older_store_is_migrated_on_open_and_keeps_its_data(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    assert migrate(db, "migrations", upto=1) == [1]
    db.execute(
        "INSERT INTO candidates (candidate_id, tenant, workspace, state, payload_digest, evidence_digest, principal,"
        " agent_id, session, captured_at_ms, capture_cursor, size_bytes, citation_count, has_attestation,"
        " secret_categories) VALUES ('cand_a', 't', 'w', 'pending', 'd', 'e', 'p', 'a', 's', 1, 1, 10, 1, 0, '[]')"
    )
    db.close()
    SQLiteStore(tmp_path / "s.db").close()
    with sqlite3.connect(tmp_path / "s.db") as check:
        assert [row[0] for row in check.execute("SELECT version FROM schema_migrations ORDER BY version")] == VERSIONS
        assert check.execute("SELECT candidate_id, trust_class, review_reasons FROM candidates").fetchall() == [
            ("cand_a", "asserted", "[]")
        ]


def test_tampered_migration_ledger_is_refused(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "s.db").close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        db.execute("UPDATE schema_migrations SET digest = 'sha256:' || hex(zeroblob(32)) WHERE version = 1")
    with pytest.raises(ContractError) as caught:
        SQLiteStore(tmp_path / "s.db")
    assert caught.value.code is ErrorCode.MIGRATION_LEDGER_INVALID


def test_ledger_naming_an_unknown_migration_is_refused(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "s.db").close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        db.execute("INSERT INTO schema_migrations VALUES (99, '0099_future.sql', 'sha256:00', 0)")
    with pytest.raises(ContractError) as caught:
        SQLiteStore(tmp_path / "s.db")
    assert caught.value.code is ErrorCode.MIGRATION_LEDGER_INVALID


def test_unopenable_store_is_store_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ContractError) as caught:
        SQLiteStore(tmp_path / "missing-folder" / "s.db")
    assert caught.value.code is ErrorCode.STORE_UNAVAILABLE


def test_vault_has_its_own_ledger(tmp_path: Path) -> None:
    SQLiteKeyVault(tmp_path / "v.db").close()
    with sqlite3.connect(tmp_path / "v.db") as db:
        versions = [row[0] for row in db.execute("SELECT version FROM schema_migrations ORDER BY version")]
        assert versions == [version for version, _, _ in bundled("vault_migrations")] and len(versions) >= 2


# -- faults, named from SQLite's result codes ------------------------------------------------------------


def test_a_write_that_waits_out_the_busy_timeout_is_a_busy_store_unavailable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db", busy_timeout_ms=50)
    other = sqlite3.connect(tmp_path / "s.db", isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreError) as caught, store.write():
            pass
        assert (caught.value.code, caught.value.fault) == (ErrorCode.STORE_UNAVAILABLE, StoreFault.BUSY)
    finally:
        other.execute("ROLLBACK")
        other.close()
        store.close()


def test_a_damaged_page_is_a_corrupt_store_unavailable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    with store.write() as tx:
        event(tx, SCOPE_A)
    store.close()
    with sqlite3.connect(tmp_path / "s.db") as db:
        page_size = int(db.execute("PRAGMA page_size").fetchone()[0])
        root = int(db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'journal'").fetchone()[0])
    db.close()
    data = bytearray((tmp_path / "s.db").read_bytes())
    data[(root - 1) * page_size : (root - 1) * page_size + 12] = b"\xff" * 12  # an invalid b-tree page header
    (tmp_path / "s.db").write_bytes(bytes(data))
    store = SQLiteStore(tmp_path / "s.db")
    try:
        with pytest.raises(StoreError) as caught, store.read() as tx:
            list(tx.events(SCOPE_A))
        assert (caught.value.code, caught.value.fault) == (ErrorCode.STORE_UNAVAILABLE, StoreFault.CORRUPT)
    finally:
        store.close()


def test_a_file_that_may_not_grow_is_a_full_store_unavailable(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    try:
        with store.read():  # the store's own connection: SQLITE_FULL exactly as from a full disk
            pages = store._db.execute("PRAGMA page_count").fetchone()[0]
        store._db.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreError) as caught, store.write() as tx:
            for number in range(200):
                event(tx, SCOPE_A, candidate_id=f"cand_{number:04d}_" + "x" * 200)
        assert (caught.value.code, caught.value.fault) == (ErrorCode.STORE_UNAVAILABLE, StoreFault.FULL)
    finally:
        store.close()


# -- the statement tracer --------------------------------------------------------------------------------


def _own(traced: list[str]) -> list[str]:
    """The statements the store ran: what FTS5 runs on its shadow tables comes as "-- " comments, inside them;
    the busy timeout is set aside around BEGIN IMMEDIATE (SQLiteStore._begin_immediate), outside them."""
    return [s for s in traced if not s.startswith("-- ") and not s.startswith("PRAGMA busy_timeout")]


def test_tracer_sees_a_search_run_only_reads_inside_one_read_transaction(tmp_path: Path) -> None:
    traced: list[str] = []
    store = SQLiteStore(tmp_path / "s.db", tracer=traced.append)
    try:
        with store.write() as tx:
            event(tx, SCOPE_A)
            tx.insert_record(record(SCOPE_A, "mem_a"))
            tx.index_record(SCOPE_A, "mem_a", fields(primary="blue green deploy"), tokenizer=tokenizer_id())
        written = _own(traced)
        assert written[0] == "BEGIN IMMEDIATE" and written[-1] == "COMMIT"
        assert not any(s.startswith(("BEGIN", "COMMIT", "ROLLBACK")) for s in written[1:-1])
        traced.clear()
        with store.read() as tx:
            found = tx.lexical_candidates(SCOPE_A, ["green"], valid_at_ms=AT_MS, limit=10)
            counts = tx.term_doc_counts(SCOPE_A, ["green", "absent"])
        assert [doc.record_id for doc in found] == ["mem_a"] and counts == {"green": 1, "absent": 0}
        searched = _own(traced)
        assert searched[0] == "BEGIN" and searched[-1] == "ROLLBACK"
        assert searched[1:-1] and all(s.lstrip().upper().startswith(READS) for s in searched[1:-1]), searched
    finally:
        store.close()


def test_a_page_of_hits_is_read_through_the_ids_unique_indexes_not_a_scan_of_the_scope(tmp_path: Path) -> None:
    """Without statistics SQLite served the scope condition from records_by_digest's prefix and read
    every record of the scope per page; the plan must look the ids up instead."""
    traced: list[str] = []
    store = SQLiteStore(tmp_path / "s.db", tracer=traced.append)
    try:
        with store.write() as tx:
            event(tx, SCOPE_A)
            for name in ("mem_a", "mem_b"):
                tx.insert_record(record(SCOPE_A, name))
        traced.clear()
        with store.read() as tx:
            assert set(tx.get_records(SCOPE_A, ["mem_a", "mem_b", "mem_absent"])) == {"mem_a", "mem_b"}
            assert tx.get_records(SCOPE_B, ["mem_a"]) == {}
            assert tx.get_bodies(SCOPE_A, ["mem_a"]) == {}
        reads = [s for s in _own(traced) if " IN (" in s]
    finally:
        store.close()
    assert len(reads) == 3
    with sqlite3.connect(tmp_path / "s.db") as db:
        plans = [" ".join(str(row[3]) for row in db.execute("EXPLAIN QUERY PLAN " + s)) for s in reads]
    assert all("sqlite_autoindex" in plan and "records_by_digest" not in plan for plan in plans), plans


def test_a_batchs_audit_rows_go_in_without_savepoints_and_commit_with_its_writes(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "store.db")
    seen: list[str] = []
    try:
        with store.batch():
            store._db.set_trace_callback(seen.append)
            with store.write(scopes=[SCOPE_A]) as tx:
                event(tx, SCOPE_A)
            store.append_audit(audit("aud_1", AT_MS))
        assert [s for s in seen if s.startswith("SAVEPOINT")] == ["SAVEPOINT batch_write"]  # the write's only
        with store.read() as tx:
            assert [row.audit_id for row in tx.audit_rows(None, None)] == ["aud_1"]
    finally:
        store.close()


def test_a_batch_whose_transaction_was_rolled_back_under_it_ends_unknown_mocked_fault(tmp_path: Path) -> None:
    """A full disk or an I/O error can make SQLite roll a whole transaction back; that cannot be caused
    on purpose here, so the rollback is issued behind the store's back before the next audit row."""
    store = SQLiteStore(tmp_path / "store.db")
    try:
        with pytest.raises(ContractError) as ended, store.batch():
            with store.write(scopes=[SCOPE_A]) as tx:
                event(tx, SCOPE_A)
            store.append_audit(audit("aud_1", AT_MS))
            store._db.execute("ROLLBACK")
            store.append_audit(audit("aud_2", AT_MS))  # outside any transaction: the batch knows it is torn
        assert ended.value.code is ErrorCode.MUTATION_OUTCOME_UNKNOWN
        with store.read() as tx:
            assert tx.head(SCOPE_A) is None
    finally:
        store.close()
