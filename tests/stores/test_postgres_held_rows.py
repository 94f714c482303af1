"""A PostgreSQL batch's held rows (stores/postgres/deferred.py, bulk.py, held_tx.py): written in bulk at
its commit, read back inside it, written first whenever another statement runs, and dropped with the
write that held them when it fails.

What another connection sees is read from a second store on the same database; the runtime role is a
real role under row-level security.
"""

from __future__ import annotations

import threading

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engram_memory.contract.errors import ContractError
from engram_memory.engine.ports.store import Scope, SealedBody
from engram_memory.stores.postgres.connection import with_user
from engram_memory.stores.postgres.lexemes import index_tsvector, scope_token
from engram_memory.stores.postgres.roles import STORE_GRANTS, grant
from engram_memory.stores.postgres.store import PostgresStore
from tests.stores.builders import SCOPE_A, SCOPE_A2, SCOPE_B, candidate, event, fields, idempotency, record
from tests.support.postgres import APP_ROLE

BODY = SealedBody(nonce=b"n" * 12, ciphertext=b"sealed")


def _statements(store: PostgresStore) -> list[str]:
    """The statements the store's connections run from now on (its tracer), as a list that fills up."""
    seen: list[str] = []
    store._tracer = seen.append
    return seen


def _capture(store: PostgresStore, scope: Scope, candidate_id: str, key: str) -> None:
    with store.write(scopes=[scope]) as tx:
        captured = event(tx, scope, candidate_id=candidate_id)
        tx.insert_candidate(candidate(scope, candidate_id, cursor=captured.cursor))
        tx.put_body(scope, candidate_id, BODY)
        tx.put_idempotency(idempotency(scope, key))


def _admit(store: PostgresStore, scope: Scope, candidate_id: str, record_id: str) -> None:
    with store.write(scopes=[scope]) as tx:
        admitted = event(tx, scope, "candidate.accepted", candidate_id=candidate_id, record_id=record_id)
        tx.insert_record(record(scope, record_id, candidate_id=candidate_id, state_cursor=admitted.cursor))
        tx.put_body(scope, record_id, BODY)
        tx.discard_body(scope, candidate_id)
        tx.index_record(scope, record_id, fields(primary="quorum relay", evidence="relay"), tokenizer="t1")
        tx.update_candidate(scope, candidate_id, state="accepted_current", adjudication=False, record_id=record_id)


def test_a_batch_writes_its_held_rows_in_a_few_statements_and_reads_them_back_before(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores
    seen = _statements(batching)
    with batching.batch():
        for n in range(20):
            _capture(batching, SCOPE_A, f"cand_{n}", f"key-{n}")
            _admit(batching, SCOPE_A, f"cand_{n}", f"mem_{n}")
        with batching.write(scopes=[SCOPE_A]) as tx:  # what the log answers, nothing written yet
            assert tx.get_idempotency(SCOPE_A, "alice", "key-3") == idempotency(SCOPE_A, "key-3")
            held = tx.get_candidate(SCOPE_A, "cand_3")
            assert held is not None and held.state == "accepted_current" and held.record_id == "mem_3"
            assert tx.get_candidate(SCOPE_B, "cand_3") is None  # another scope's id is not this one's
            assert tx.get_body(SCOPE_A, "mem_3") == BODY and tx.get_body(SCOPE_A, "cand_3") is None
            assert tx.get_bodies(SCOPE_A, ["mem_1", "cand_1", "mem_2"]) == {"mem_1": BODY, "mem_2": BODY}
            assert tx.find_record_by_digest(SCOPE_A, "sha256:" + "c" * 64, "accepted_current") == "mem_0"
            assert not any(statement.startswith("INSERT") for statement in seen)
        with other.read() as tx:
            assert tx.head(SCOPE_A) is None
    inserts = [statement for statement in seen if statement.startswith(("INSERT", "UPDATE"))]
    assert len(inserts) <= 12  # a statement per table, not per row (20 captures and admissions)
    with other.read() as tx:
        head = tx.head(SCOPE_A)
        assert head is not None and head.cursor == 40 and head.records_cursor == 40
        assert [e.cursor for e in tx.events(SCOPE_A)] == list(range(1, 41))
        assert tx.get_body(SCOPE_A, "cand_7") is None and tx.get_body(SCOPE_A, "mem_7") == BODY
        found = tx.lexical_candidates(SCOPE_A, ["quorum"], valid_at_ms=2_000_000_000_000, limit=50)
        assert sorted(doc.record_id for doc in found) == sorted(f"mem_{n}" for n in range(20))
        assert tx.index_stats(SCOPE_A).doc_count == 20 and tx.term_doc_counts(SCOPE_A, ["relay"]) == {"relay": 20}
        assert tx.index_integrity_ok()


def test_a_statement_the_log_cannot_answer_sees_every_held_row(stores: tuple[PostgresStore, PostgresStore]) -> None:
    batching, _ = stores
    with batching.batch():
        _capture(batching, SCOPE_A, "cand_1", "key-1")
        with batching.write(scopes=[SCOPE_A]) as tx:
            event(tx, SCOPE_A)
            # a plain statement of the transaction: both writes' rows are in the tables before it runs
            rows = tx.connection.execute("SELECT cursor FROM journal ORDER BY cursor").fetchall()
            assert [row[0] for row in rows] == [1, 2]
            assert tx.connection.execute("SELECT count(*) FROM sealed_bodies").fetchone()[0] == 1


def test_a_failed_write_drops_its_held_rows_and_undoes_what_it_wrote_but_keeps_the_writes_before(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores
    with batching.batch():
        _capture(batching, SCOPE_A, "cand_1", "key-1")
        with pytest.raises(RuntimeError), batching.write(scopes=[SCOPE_A]) as tx:  # held rows only
            _capture_in(tx, SCOPE_A, "cand_2", "key-2")
            raise RuntimeError("the engine's own failure")
        with pytest.raises(ContractError), batching.write(scopes=[SCOPE_A]) as tx:  # held rows, then a statement
            _capture_in(tx, SCOPE_A, "cand_3", "key-3")
            tx.connection.execute("SELECT 1 / 0").fetchone()
        with pytest.raises(RuntimeError), batching.write(scopes=[SCOPE_A]) as tx:  # written, then more held
            _capture_in(tx, SCOPE_A, "cand_4", "key-4")
            tx.connection.execute("SELECT 1").fetchone()
            tx.put_idempotency(idempotency(SCOPE_A, "key-4b"))
            raise RuntimeError("the engine's own failure")
        _capture(batching, SCOPE_A, "cand_5", "key-5")
        with batching.write(scopes=[SCOPE_A]) as tx:
            assert tx.get_idempotency(SCOPE_A, "alice", "key-2") is None
            assert tx.get_candidate(SCOPE_A, "cand_4") is None and tx.get_body(SCOPE_A, "cand_3") is None
    with other.read() as tx:
        assert [e.body["data"]["candidate_id"] for e in tx.events(SCOPE_A)] == ["cand_1", "cand_5"]
        assert [e.cursor for e in tx.events(SCOPE_A)] == [1, 2]
        for n in (2, 3, 4):
            assert tx.get_candidate(SCOPE_A, f"cand_{n}") is None
            assert tx.get_idempotency(SCOPE_A, "alice", f"key-{n}") is None
        assert tx.get_idempotency(SCOPE_A, "alice", "key-4b") is None
        assert tx.get_candidate(SCOPE_A, "cand_5") is not None


def _capture_in(tx: object, scope: Scope, candidate_id: str, key: str) -> None:
    captured = event(tx, scope, candidate_id=candidate_id)  # type: ignore[arg-type]
    tx.insert_candidate(candidate(scope, candidate_id, cursor=captured.cursor))  # type: ignore[attr-defined]
    tx.put_body(scope, candidate_id, BODY)  # type: ignore[attr-defined]
    tx.put_idempotency(idempotency(scope, key))  # type: ignore[attr-defined]


def test_an_admission_in_a_later_batch_updates_and_discards_what_is_already_stored(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores
    with batching.batch():
        _capture(batching, SCOPE_A, "cand_1", "key-1")
    with batching.batch():
        _admit(batching, SCOPE_A, "cand_1", "mem_1")
        with batching.write(scopes=[SCOPE_A]) as tx:  # an update held for a stored row: read after writing it
            held = tx.get_candidate(SCOPE_A, "cand_1")
            assert held is not None and held.state == "accepted_current"
    with other.read() as tx:
        stored = tx.get_candidate(SCOPE_A, "cand_1")
        assert stored is not None and stored.record_id == "mem_1"
        assert tx.get_body(SCOPE_A, "cand_1") is None and tx.get_body(SCOPE_A, "mem_1") == BODY


def test_rows_of_two_tenants_held_together_are_each_written_under_their_own_tenant(pg_url: str) -> None:
    owner = PostgresStore(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as db:
        grant(db, APP_ROLE, STORE_GRANTS)
    runtime = PostgresStore(with_user(pg_url, APP_ROLE), run_migrations=False)
    try:
        with runtime.batch():
            with runtime.write(scopes=[SCOPE_A, SCOPE_B]) as tx:
                for scope in (SCOPE_A, SCOPE_B, SCOPE_A2):
                    _capture_in(tx, scope, f"cand_{scope.tenant}_{scope.workspace}", "key-1")
            with runtime.write(scopes=[SCOPE_A, SCOPE_B]) as tx:
                assert tx.head(SCOPE_B) is not None  # the tenant it last named is still the one it reads as
        with owner.read() as tx:
            for scope in (SCOPE_A, SCOPE_B, SCOPE_A2):
                assert [e.cursor for e in tx.events(scope)] == [1]
                assert tx.get_idempotency(scope, "alice", "key-1") is not None
    finally:
        runtime.close()
        owner.close()


_TOKENS = st.text(st.characters(codec="utf-8", exclude_characters=" \x00"), min_size=1, max_size=12) | st.sampled_from(
    ["it's", "back\\slash", "中文", "한국어", "日本語", "x" * 300, "é" * 200, "'", "\\"]
)
_FIELD = st.lists(_TOKENS, max_size=6).map(" ".join)


@pytest.fixture
def migrated(pg_url: str) -> str:
    PostgresStore(pg_url).close()
    return pg_url


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.tuples(_FIELD, _FIELD, _FIELD, _FIELD, _FIELD))
def test_the_stores_tsvector_is_what_the_schemas_function_gives(migrated: str, values: tuple[str, ...]) -> None:
    token = scope_token(SCOPE_A)
    with psycopg.connect(migrated, autocommit=True) as db:
        row = db.execute(
            "SELECT %s::tsvector = engram_index_tsvector(%s, %s, %s, %s, %s, %s)",
            (index_tsvector(token, values), token, *values),
        ).fetchone()
    assert row is not None and row[0] is True


def test_a_batch_remembers_a_scope_without_tombstones_only_until_one_is_added_or_its_lock_goes(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores
    seen = _statements(batching)
    with batching.batch():
        _capture(batching, SCOPE_A, "cand_1", "key-1")
        for _ in range(3):
            with batching.write(scopes=[SCOPE_A]) as tx:
                assert not tx.holds_tombstones(SCOPE_A)
        assert sum("FROM tombstones" in statement for statement in seen) == 1  # one query, then remembered
        with batching.write(scopes=[SCOPE_A]) as tx:
            tx.add_tombstone(SCOPE_A, ["fp:1"], 1)
        with batching.write(scopes=[SCOPE_A]) as tx:
            assert tx.holds_tombstones(SCOPE_A) and tx.is_tombstoned(SCOPE_A, ["fp:1"])
            assert not tx.is_tombstoned(SCOPE_A, ["fp:2"])
    with batching.batch():
        _capture(batching, SCOPE_B, "cand_2", "key-2")
        with batching.write(scopes=[SCOPE_B]) as tx:
            assert not tx.holds_tombstones(SCOPE_B)
        _capture(batching, SCOPE_A, "cand_3", "key-3")  # another scope: B's lock goes with a commit
        with other.write(scopes=[SCOPE_B]) as tx:
            tx.add_tombstone(SCOPE_B, ["fp:3"], 1)
        with batching.write(scopes=[SCOPE_B]) as tx:
            assert tx.holds_tombstones(SCOPE_B)


def test_expected_keys_are_read_a_window_at_a_time_and_read_again_once_the_lock_was_released(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores
    with other.write(scopes=[SCOPE_A]) as tx:
        tx.put_idempotency(idempotency(SCOPE_A, "key-5"))
    seen = _statements(batching)
    with batching.batch():
        batching.expect_idempotency(SCOPE_A, "alice", [f"key-{n}" for n in range(10)])
        with batching.write(scopes=[SCOPE_A]) as tx:
            event(tx, SCOPE_A)
        with batching.write(scopes=[SCOPE_A]) as tx:
            found = {n: tx.get_idempotency(SCOPE_A, "alice", f"key-{n}") for n in range(10)}
            tx.put_idempotency(idempotency(SCOPE_A, "key-7"))
        assert [n for n, row in found.items() if row is not None] == [5]
        assert sum("FROM idempotency" in statement for statement in seen) == 1
        with batching.write(scopes=[SCOPE_A]) as tx:  # its own key, written since it was read as absent
            assert tx.get_idempotency(SCOPE_A, "alice", "key-7") is not None
        with batching.write() as tx:  # a whole-store write: the batch commits and lets A go first
            tx.connection.execute("SELECT 1").fetchone()
        with other.write(scopes=[SCOPE_A]) as tx:
            tx.put_idempotency(idempotency(SCOPE_A, "key-8"))
        with batching.write(scopes=[SCOPE_A]) as tx:
            assert tx.get_idempotency(SCOPE_A, "alice", "key-8") is not None


def test_a_batch_told_of_several_scopes_writes_them_in_one_transaction(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores
    with batching.batch():
        batching.expect_idempotency(SCOPE_B, "alice", ["key-2"])
        batching.expect_idempotency(SCOPE_A, "alice", ["key-1", "key-3"])
        _capture(batching, SCOPE_A, "cand_1", "key-1")
        _capture(batching, SCOPE_B, "cand_2", "key-2")
        _capture(batching, SCOPE_A, "cand_3", "key-3")
        with other.read() as tx:  # nothing committed between the scopes' writes
            assert tx.head(SCOPE_A) is None and tx.head(SCOPE_B) is None
    with other.read() as tx:
        assert [e.cursor for e in tx.events(SCOPE_A)] == [1, 2] and [e.cursor for e in tx.events(SCOPE_B)] == [1]


def test_batches_told_of_the_same_scopes_in_other_orders_take_their_locks_in_one_order(pg_url: str) -> None:
    stores = [PostgresStore(pg_url) for _ in range(2)]
    failures: list[BaseException] = []

    def run(store: PostgresStore, order: list[Scope], tag: str) -> None:
        try:
            for n in range(20):
                with store.batch():
                    for scope in order:
                        store.expect_idempotency(scope, "alice", [f"{tag}-{n}-{scope.tenant}"])
                    for scope in order:
                        _capture(store, scope, f"cand_{tag}_{n}_{scope.tenant}", f"{tag}-{n}-{scope.tenant}")
        except BaseException as exc:
            failures.append(exc)

    threads = [
        threading.Thread(target=run, args=(stores[0], [SCOPE_A, SCOPE_B], "x")),
        threading.Thread(target=run, args=(stores[1], [SCOPE_B, SCOPE_A], "y")),
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert failures == [] and not any(thread.is_alive() for thread in threads)
        with stores[0].read() as tx:
            assert len(list(tx.events(SCOPE_A))) == 40 and len(list(tx.events(SCOPE_B))) == 40
    finally:
        for store in stores:
            store.close()
