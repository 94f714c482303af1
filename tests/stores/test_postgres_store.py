"""The PostgreSQL store's own mechanisms: the migration ledger, the writers' advisory lock, retries of
transactions the server rolled back for a concurrent one, translated driver faults, physical erasure,
and the statement tracer."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from engram_memory.contract.arguments import AdmissionArguments
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.tools import Tool
from engram_memory.engine import journal
from engram_memory.engine.mutation import MAX_ATTEMPTS, run_mutation
from engram_memory.engine.ports.faults import StoreError, StoreFault
from engram_memory.engine.ports.store import SealedBody, StoreTx, TransientConflict
from engram_memory.engine.recall.text import tokenizer_id
from engram_memory.stores.postgres import store as postgres_store
from engram_memory.stores.postgres.connection import check_idle_connection
from engram_memory.stores.postgres.migrate import STORE_MIGRATIONS, VAULT_MIGRATIONS, bundled, migrate
from engram_memory.stores.postgres.roles import STORE_GRANTS, grant
from engram_memory.stores.postgres.store import ERASURE_DELAY_S, WRITE_LOCK, PostgresStore, SchemaNotCurrent
from engram_memory.stores.postgres.vault import PostgresKeyVault
from tests.stores.builders import AT_MS, SCOPE_A, event, fields, record
from tests.support.postgres import APP_ROLE, OWNER_ROLE, SUPERUSER, PostgresCluster

TOKENIZER_ID = tokenizer_id()

VERSIONS = [version for version, _, _ in bundled(STORE_MIGRATIONS)]


def _database(url: str) -> str:
    return url.split("@/", 1)[1].split("?", 1)[0]


def _owner(cluster: PostgresCluster, url: str) -> psycopg.Connection[tuple[object, ...]]:
    return cluster.connect(OWNER_ROLE, _database(url))


# -- the migration ledger --------------------------------------------------------------------------------


def test_new_store_records_every_migration_and_reopening_applies_nothing_twice(
    postgres_cluster: PostgresCluster, pg_url: str
) -> None:
    PostgresStore(pg_url).close()
    PostgresStore(pg_url).close()
    with _owner(postgres_cluster, pg_url) as db:
        rows = db.execute("SELECT version, name, digest FROM schema_migrations ORDER BY version").fetchall()
    assert [row[0] for row in rows] == VERSIONS and len(VERSIONS) >= 2
    assert all(str(row[2]).startswith("sha256:") for row in rows)


def test_older_store_is_migrated_by_the_owner_and_refused_to_the_runtime_role(
    postgres_cluster: PostgresCluster, pg_url: str
) -> None:
    with _owner(postgres_cluster, pg_url) as db:
        assert migrate(db, STORE_MIGRATIONS, upto=1) == [1]
        grant(db, APP_ROLE, {"schema_migrations": "SELECT"})
    runtime_url = postgres_cluster.url(APP_ROLE, _database(pg_url))
    with pytest.raises(SchemaNotCurrent) as behind:
        PostgresStore(runtime_url, run_migrations=False)
    assert behind.value.versions == VERSIONS[1:] and behind.value.code is ErrorCode.STORE_UNAVAILABLE
    PostgresStore(pg_url).close()
    PostgresStore(runtime_url, run_migrations=False).close()


@pytest.mark.parametrize(
    "tamper",
    [
        "UPDATE schema_migrations SET digest = 'sha256:00' WHERE version = 1",
        "INSERT INTO schema_migrations VALUES (99, '0099_future.sql', 'sha256:00', 0)",
    ],
    ids=["edited", "unknown"],
)
def test_a_ledger_that_does_not_match_the_bundled_migrations_is_refused(
    postgres_cluster: PostgresCluster, pg_url: str, tamper: str
) -> None:
    PostgresStore(pg_url).close()
    with _owner(postgres_cluster, pg_url) as db:
        db.execute(tamper)  # type: ignore[call-overload]
    with pytest.raises(ContractError) as raised:
        PostgresStore(pg_url)
    assert raised.value.code is ErrorCode.MIGRATION_LEDGER_INVALID


def test_vault_has_its_own_ledger(postgres_cluster: PostgresCluster, pg_url: str) -> None:
    PostgresKeyVault(pg_url).close()
    with _owner(postgres_cluster, pg_url) as db:
        versions = [row[0] for row in db.execute("SELECT version FROM schema_migrations ORDER BY version")]
    assert versions == [version for version, _, _ in bundled(VAULT_MIGRATIONS)] and len(versions) >= 3


def test_unreachable_server_is_store_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ContractError) as raised:
        PostgresStore(f"postgresql://{OWNER_ROLE}@/engram?host={tmp_path}", connect_timeout_s=1)
    assert raised.value.code is ErrorCode.STORE_UNAVAILABLE


# -- writers queue on one advisory lock ---------------------------------------------------------------------


def test_advisory_lock_makes_a_second_writer_wait_for_the_first_to_commit(pg_url: str) -> None:
    first, second = PostgresStore(pg_url), PostgresStore(pg_url)  # two pools: two processes, as far as the server sees
    inside, entered_second, first_done = threading.Event(), [0.0], [0.0]

    def hold_the_lock() -> None:
        with first.write() as tx:
            event(tx, SCOPE_A)
            inside.set()
            time.sleep(0.5)
            first_done[0] = time.monotonic()  # the commit comes after this

    holder = threading.Thread(target=hold_the_lock)
    try:
        holder.start()
        assert inside.wait(5)
        with second.write() as tx:
            entered_second[0] = time.monotonic()
            head = tx.head(SCOPE_A)
            assert head is not None and head.cursor == 1  # it sees the first writer's commit
            event(tx, SCOPE_A)
        holder.join()
        assert entered_second[0] >= first_done[0] > 0
        with first.read() as tx:
            assert [e.cursor for e in tx.events(SCOPE_A)] == [1, 2]
    finally:
        holder.join()
        first.close()
        second.close()


def test_a_writer_that_waits_out_the_lock_timeout_is_a_busy_store_unavailable(
    postgres_cluster: PostgresCluster, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_store, "LOCK_TIMEOUT", "100ms")
    store = PostgresStore(pg_url)
    try:
        with _owner(postgres_cluster, pg_url) as other:
            other.execute("BEGIN")
            other.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            with pytest.raises(StoreError) as caught, store.write():
                pass
            other.execute("ROLLBACK")
        assert (caught.value.code, caught.value.fault) == (ErrorCode.STORE_UNAVAILABLE, StoreFault.BUSY)
        assert not isinstance(caught.value, TransientConflict)
    finally:
        store.close()


def test_concurrent_writers_through_two_stores_keep_the_journal_dense(pg_url: str) -> None:
    stores = [PostgresStore(pg_url), PostgresStore(pg_url)]
    failures: list[BaseException] = []

    def append_many(store: PostgresStore) -> None:
        try:
            for _ in range(15):
                with store.write() as tx:  # read the head, then append after it: safe only if writers queue
                    event(tx, SCOPE_A)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=append_many, args=(stores[n % 2],)) for n in range(4)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
        with stores[0].read() as tx:
            events = list(tx.events(SCOPE_A))
        assert [e.cursor for e in events] == list(range(1, 61))
        assert journal.verify_chain(SCOPE_A, events).cursor == 60
    finally:
        for store in stores:
            store.close()


# -- transactions the server rolled back for a concurrent one are run again --------------------------------

_FAIL_FIRST = """
CREATE SEQUENCE attempts;
CREATE FUNCTION conflict_first_time() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- nextval is not rolled back: the first attempt fails, the ones after it pass.
    IF nextval('attempts') <= {failures} THEN
        RAISE EXCEPTION 'conflict' USING ERRCODE = '{sqlstate}';
    END IF;
    RETURN NEW;
END $$;
"""


def _server_conflicts(cluster: PostgresCluster, url: str, *, failures: int, sqlstate: str, at_commit: bool) -> None:
    """The server itself reports SQLSTATE `sqlstate` for the next `failures` journal appends (at COMMIT if asked)."""
    PostgresStore(url).close()
    with _owner(cluster, url) as db:
        db.execute(_FAIL_FIRST.format(failures=failures, sqlstate=sqlstate))  # type: ignore[call-overload]
        if at_commit:
            db.execute(
                "CREATE CONSTRAINT TRIGGER conflict AFTER INSERT ON journal DEFERRABLE INITIALLY DEFERRED"
                " FOR EACH ROW EXECUTE FUNCTION conflict_first_time()"
            )
        else:
            db.execute(
                "CREATE TRIGGER conflict BEFORE INSERT ON journal FOR EACH ROW EXECUTE FUNCTION conflict_first_time()"
            )


def _mutate(store: PostgresStore, attempts: list[int]) -> dict[str, Any]:
    def body(tx: StoreTx, _digest: str) -> dict[str, Any]:
        attempts.append(1)
        return {"cursor": event(tx, SCOPE_A).cursor}

    deps = SimpleNamespace(store=store)
    arguments = AdmissionArguments("cand", "k" * 16, {"candidate_id": "cand", "idempotency_key": "k" * 16})
    return run_mutation(deps, SCOPE_A, Tool.REQUEST_ADMISSION, arguments, body)  # type: ignore[arg-type]


@pytest.mark.parametrize("at_commit", [False, True], ids=["in-body", "at-commit"])
@pytest.mark.parametrize("sqlstate", ["40001", "40P01"], ids=["serialization-failure", "deadlock"])
def test_server_reported_conflict_is_retried_and_applied_once(
    postgres_cluster: PostgresCluster, pg_url: str, sqlstate: str, at_commit: bool
) -> None:
    _server_conflicts(postgres_cluster, pg_url, failures=1, sqlstate=sqlstate, at_commit=at_commit)
    store = PostgresStore(pg_url)
    attempts: list[int] = []
    try:
        assert _mutate(store, attempts) == {"cursor": 1}
        assert len(attempts) == 2
        with store.read() as tx:
            assert [e.cursor for e in tx.events(SCOPE_A)] == [1]
    finally:
        store.close()


def test_conflicts_that_persist_end_as_store_unavailable_with_nothing_written(
    postgres_cluster: PostgresCluster, pg_url: str
) -> None:
    _server_conflicts(postgres_cluster, pg_url, failures=MAX_ATTEMPTS, sqlstate="40001", at_commit=False)
    store = PostgresStore(pg_url)
    attempts: list[int] = []
    try:
        with pytest.raises(ContractError) as raised:
            _mutate(store, attempts)
        assert raised.value.code is ErrorCode.STORE_UNAVAILABLE and not isinstance(raised.value, TransientConflict)
        assert len(attempts) == MAX_ATTEMPTS
        with store.read() as tx:
            assert tx.head(SCOPE_A) is None
    finally:
        store.close()


def test_a_commit_that_fails_otherwise_is_mutation_outcome_unknown(
    postgres_cluster: PostgresCluster, pg_url: str
) -> None:
    _server_conflicts(postgres_cluster, pg_url, failures=1, sqlstate="XX000", at_commit=True)
    store = PostgresStore(pg_url)
    try:
        with pytest.raises(ContractError) as raised, store.write() as tx:
            event(tx, SCOPE_A)
        assert raised.value.code is ErrorCode.MUTATION_OUTCOME_UNKNOWN
        with store.write() as tx:  # the pool hands out a healthy connection again
            assert event(tx, SCOPE_A).cursor == 1
    finally:
        store.close()


def test_connections_the_server_dropped_are_replaced(postgres_cluster: PostgresCluster, pg_url: str) -> None:
    store = PostgresStore(pg_url)
    try:
        with store.write() as tx:
            event(tx, SCOPE_A)
        with postgres_cluster.connect(SUPERUSER, "postgres") as admin:
            _drop_every_backend(admin, _database(pg_url))
        with store.read() as tx:
            head = tx.head(SCOPE_A)
        assert head is not None and head.cursor == 1
    finally:
        store.close()


def _drop_every_backend(admin: psycopg.Connection[tuple[object, ...]], database: str) -> None:
    """Terminates every backend serving `database` until none does: a pool still filling in the background
    (a loaded machine) may connect after the first round, and its connection must be dropped too. A
    terminated backend has closed its socket once it is gone from pg_stat_activity."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (database,))
        row = admin.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database,)).fetchone()
        if row is not None and row[0] == 0:
            return
        time.sleep(0.01)
    raise AssertionError("the backends serving the database did not exit")


def test_a_quiet_pooled_connection_is_checked_without_a_round_trip_and_a_dropped_one_is_refused(
    postgres_cluster: PostgresCluster, pg_url: str
) -> None:
    with (
        psycopg.connect(pg_url, autocommit=True) as connection,
        postgres_cluster.connect(SUPERUSER, "postgres") as admin,
    ):
        connection.execute("SELECT 41")
        pid = connection.info.backend_pid
        check_idle_connection(connection)
        row = admin.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
        assert row is not None and row[0] == "SELECT 41"  # the check sent nothing
        _drop_every_backend(admin, _database(pg_url))
        with pytest.raises(psycopg.OperationalError):
            check_idle_connection(connection)


# -- physical erasure -----------------------------------------------------------------------------------------


def _relation_files(cluster: PostgresCluster, url: str, table: str) -> list[Path]:
    """Every file that holds the table's rows: its heap, its TOAST table and every index."""
    with _owner(cluster, url) as db:
        rows = db.execute(
            "SELECT pg_relation_filepath(oid) FROM pg_class WHERE oid = %s::regclass"
            " OR oid = (SELECT reltoastrelid FROM pg_class WHERE oid = %s::regclass)"
            " OR oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = %s::regclass)",
            (table, table, table),
        ).fetchall()
    with cluster.connect(SUPERUSER, "postgres") as admin:
        admin.execute("CHECKPOINT")  # so the pages on disk are the pages in memory
    return [cluster.data / str(row[0]) for row in rows if row[0]]


def _files_holding(files: list[Path], needle: bytes) -> list[str]:
    return [path.name for path in files if path.exists() and needle in path.read_bytes()]


def test_erasure_rewrites_the_index_table_so_deleted_tokens_leave_its_files(
    postgres_cluster: PostgresCluster, pg_url: str
) -> None:
    token = "zqxerasuremarkertoken"
    store = PostgresStore(pg_url)
    try:
        with store.write() as tx:
            event(tx, SCOPE_A)
            for number in range(3):
                tx.insert_record(record(SCOPE_A, f"mem_{number}"))
                tx.index_record(
                    SCOPE_A, f"mem_{number}", fields(primary=f"kept words {number}"), tokenizer=TOKENIZER_ID
                )
            tx.insert_record(record(SCOPE_A, "mem_gone"))
            tx.index_record(SCOPE_A, "mem_gone", fields(primary=f"forgotten {token}"), tokenizer=TOKENIZER_ID)
            tx.put_body(SCOPE_A, "mem_gone", SealedBody(b"n" * 12, b"body-of-the-forgotten-record"))
        assert _files_holding(_relation_files(postgres_cluster, pg_url, "lexical_index"), token.encode())
        with store.write() as tx:  # what erase_record does inside a forget's transaction
            assert tx.unindex_record(SCOPE_A, "mem_gone")
            tx.purge_index()
            assert tx.destroy_body(SCOPE_A, "mem_gone")
        with _owner(postgres_cluster, pg_url) as db:
            db.execute("VACUUM lexical_index")
        # A plain VACUUM frees the space but leaves the bytes: that is why erasure rewrites the table.
        assert _files_holding(_relation_files(postgres_cluster, pg_url, "lexical_index"), token.encode())
        assert store.erase_physically(now=True)
        assert _files_holding(_relation_files(postgres_cluster, pg_url, "lexical_index"), token.encode()) == []
        with _owner(postgres_cluster, pg_url) as db:
            assert db.execute("SELECT count(*) FROM erasure_requests").fetchone() == (0,)
        with store.read() as tx:
            assert len(tx.lexical_candidates(SCOPE_A, ["kept"], valid_at_ms=2**52, limit=10)) == 3
            assert tx.index_row_count() == 3 and tx.index_integrity_ok()
    finally:
        store.close()


def test_erasure_the_runtime_role_cannot_do_is_finished_by_the_next_owner_process(
    postgres_cluster: PostgresCluster, pg_url: str
) -> None:
    owner = PostgresStore(pg_url)
    with owner.write() as tx:
        event(tx, SCOPE_A)
        tx.insert_record(record(SCOPE_A, "mem_1"))
        tx.index_record(SCOPE_A, "mem_1", fields(primary="words"), tokenizer=TOKENIZER_ID)
    owner.close()
    with _owner(postgres_cluster, pg_url) as db:
        grant(db, APP_ROLE, STORE_GRANTS)
    runtime = PostgresStore(postgres_cluster.url(APP_ROLE, _database(pg_url)), run_migrations=False)
    try:
        with runtime.write() as tx:
            assert tx.unindex_record(SCOPE_A, "mem_1")
            tx.purge_index()
        assert not runtime.erase_physically(now=True)
    finally:
        runtime.close()
    with _owner(postgres_cluster, pg_url) as db:
        assert db.execute("SELECT count(*) FROM erasure_requests").fetchone() == (1,)
    PostgresStore(pg_url).close()  # any owner process (a host command, housekeeping), once it is due
    with _owner(postgres_cluster, pg_url) as db:
        assert db.execute("SELECT count(*) FROM erasure_requests").fetchone() == (1,)
        _backdate_erasure_requests(db, ERASURE_DELAY_S + 1)
    PostgresStore(pg_url).close()
    with _owner(postgres_cluster, pg_url) as db:
        assert db.execute("SELECT count(*) FROM erasure_requests").fetchone() == (0,)


def test_refresh_statistics_analyzes_the_tables_as_the_owner_and_is_skipped_by_the_runtime_role(
    postgres_cluster: PostgresCluster, pg_url: str
) -> None:
    def analyzed() -> int:
        with _owner(postgres_cluster, pg_url) as db:
            row = db.execute(
                "SELECT count(*) FROM pg_stat_user_tables WHERE relname IN ('records', 'lexical_postings')"
                " AND last_analyze IS NOT NULL AND last_vacuum IS NOT NULL"
            ).fetchone()
        return int(row[0]) if row else 0

    owner = PostgresStore(pg_url)
    with owner.write() as tx:
        event(tx, SCOPE_A)
        tx.insert_record(record(SCOPE_A, "mem_1"))
        tx.index_record(SCOPE_A, "mem_1", fields(primary="서울 강남구 words 東京"), tokenizer=TOKENIZER_ID)
    with _owner(postgres_cluster, pg_url) as db:
        grant(db, APP_ROLE, STORE_GRANTS)
    runtime = PostgresStore(postgres_cluster.url(APP_ROLE, _database(pg_url)), run_migrations=False)
    try:
        runtime.refresh_statistics()  # the runtime role owns no table: nothing runs, nothing fails
        assert analyzed() == 0
    finally:
        runtime.close()
    try:
        owner.refresh_statistics()
    finally:
        owner.close()
    assert analyzed() == 2


def _backdate_erasure_requests(db: psycopg.Connection[Any], seconds: float) -> None:
    """Ages the waiting requests as the clock would (the server's clock, which the delay reads)."""
    db.execute("UPDATE erasure_requests SET requested_at = requested_at - make_interval(secs => %s)", (seconds,))


def test_erasures_wait_for_the_compaction_delay_and_are_compacted_together(
    postgres_cluster: PostgresCluster, pg_url: str
) -> None:
    store = PostgresStore(pg_url, erasure_delay_s=600)
    token = "zqxjvwkpfh"
    try:
        with store.write() as tx:
            event(tx, SCOPE_A)
            for name in ("mem_1", "mem_2"):
                tx.insert_record(record(SCOPE_A, name))
                tx.index_record(SCOPE_A, name, fields(primary=f"{token}{name[-1]} words"), tokenizer=TOKENIZER_ID)
        for name in ("mem_1", "mem_2"):  # two forgets, a while apart
            with store.write() as tx:
                assert tx.unindex_record(SCOPE_A, name)
                tx.purge_index()
            assert not store.erase_physically()  # not due: each forget costs one short query, no rewrite
            with _owner(postgres_cluster, pg_url) as db:
                _backdate_erasure_requests(db, 300)
        files = _relation_files(postgres_cluster, pg_url, "lexical_index")
        assert _files_holding(files, token.encode())
        with _owner(postgres_cluster, pg_url) as db:
            assert db.execute("SELECT count(*) FROM erasure_requests").fetchone() == (2,)
            _backdate_erasure_requests(db, 1)  # the first request is now 601 s old: due
        assert store.erase_physically()
        assert _files_holding(_relation_files(postgres_cluster, pg_url, "lexical_index"), token.encode()) == []
        with _owner(postgres_cluster, pg_url) as db:
            assert db.execute("SELECT count(*) FROM erasure_requests").fetchone() == (0,)
    finally:
        store.close()


def test_erasure_waits_while_an_older_snapshot_still_sees_the_rows(
    postgres_cluster: PostgresCluster, pg_url: str
) -> None:
    store = PostgresStore(pg_url)
    try:
        with store.write() as tx:
            event(tx, SCOPE_A)
            tx.put_body(SCOPE_A, "cand_1", SealedBody(b"n" * 12, b"c"))
        with store.read() as old_snapshot:
            assert old_snapshot.get_body(SCOPE_A, "cand_1") is not None
            with store.write() as tx:
                tx.destroy_body(SCOPE_A, "cand_1")
            assert not store.erase_physically(now=True)
        assert store.erase_physically(now=True)
    finally:
        store.close()


# -- the statement tracer --------------------------------------------------------------------------------


def test_tracer_sees_a_search_run_only_reads_inside_one_read_only_snapshot(pg_url: str) -> None:
    statements: list[str] = []
    store = PostgresStore(pg_url, tracer=statements.append)
    try:
        with store.write() as tx:
            event(tx, SCOPE_A)
            tx.insert_record(record(SCOPE_A, "mem_a"))
            tx.index_record(SCOPE_A, "mem_a", fields(primary="blue green deploy"), tokenizer=TOKENIZER_ID)
        begin = statements[0].split("; ")
        # One round trip begins the writer: its lock timeout and plans made for each execution's values,
        # then the whole store's write lock.
        assert begin[0] == "BEGIN ISOLATION LEVEL READ COMMITTED" and statements[-1] == "COMMIT"
        assert begin[1] == (
            "SELECT set_config('lock_timeout', '10s', true), set_config('plan_cache_mode', 'force_custom_plan', true),"
            f" pg_advisory_xact_lock({WRITE_LOCK})"
        )
        assert not any(s.startswith(("BEGIN", "COMMIT", "ROLLBACK")) for s in statements[1:-1])
        statements.clear()
        with store.read() as tx:
            found = tx.lexical_candidates(SCOPE_A, ["green"], valid_at_ms=AT_MS, limit=10)
            counts = tx.term_doc_counts(SCOPE_A, ["green", "absent"])
        assert [doc.record_id for doc in found] == ["mem_a"] and counts == {"green": 1, "absent": 0}
        assert statements[0] == "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" and statements[-1] == "ROLLBACK"
        searched = statements[1:-1]
        assert searched and all(s.lstrip().upper().startswith(("SELECT", "WITH")) for s in searched), searched
        assert not any("plan_cache_mode" in s for s in searched)  # reads keep generic plans
    finally:
        store.close()
