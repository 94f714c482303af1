"""The PostgreSQL store's batches: a thread's writes as savepoints of shared, pipelined transactions.

What another connection sees is read from a second store on the same database, never inferred from
timing; the batch's lost connection is a real backend terminated by the server.
"""

from __future__ import annotations

import psycopg
import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.ports.store import AuditRow, Scope
from engram_memory.stores.postgres.batching import CHUNK_WRITES
from engram_memory.stores.postgres.store import PostgresStore
from tests.stores.builders import SCOPE_A, SCOPE_B, event


def _events(store: PostgresStore, scope: Scope) -> list[int]:
    with store.read() as tx:
        return [e.cursor for e in tx.events(scope)]


def _write_event(store: PostgresStore, scope: Scope) -> None:
    with store.write(scopes=[scope]) as tx:
        event(tx, scope)


def test_a_batch_commits_at_its_end_and_its_thread_reads_what_it_wrote(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores
    with batching.batch():
        for _ in range(3):
            _write_event(batching, SCOPE_A)
        assert _events(batching, SCOPE_A) == [1, 2, 3]  # the batch's own thread
        assert _events(other, SCOPE_A) == []  # nobody else, before the commit
    assert _events(other, SCOPE_A) == [1, 2, 3]


def test_a_write_that_fails_inside_a_batch_rolls_back_alone(stores: tuple[PostgresStore, PostgresStore]) -> None:
    batching, other = stores
    with batching.batch():
        _write_event(batching, SCOPE_A)
        with pytest.raises(ContractError), batching.write(scopes=[SCOPE_A]) as tx:
            event(tx, SCOPE_A)
            tx.connection.execute("SELECT 1 / 0").fetchone()  # a statement the server refuses
        with pytest.raises(RuntimeError), batching.write(scopes=[SCOPE_A]) as tx:
            event(tx, SCOPE_A)
            raise RuntimeError("the engine's own failure")
        _write_event(batching, SCOPE_A)
    assert _events(other, SCOPE_A) == [1, 2]


def test_a_write_of_another_scope_first_commits_what_the_batch_held(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores
    with batching.batch():
        _write_event(batching, SCOPE_A)
        _write_event(batching, SCOPE_B)
        # Scope A's lock is no longer held by the batch: its write is visible, and another writer of A commits.
        assert _events(other, SCOPE_A) == [1]
        _write_event(other, SCOPE_A)
        assert _events(other, SCOPE_B) == []
    assert _events(other, SCOPE_A) == [1, 2] and _events(other, SCOPE_B) == [1]


def test_a_batch_reads_a_scopes_head_again_once_its_lock_was_released(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores
    with batching.batch():
        _write_event(batching, SCOPE_A)
        _write_event(batching, SCOPE_A)  # the head it wrote is kept while it holds A's lock
        _write_event(batching, SCOPE_B)  # commits, releasing A
        _write_event(other, SCOPE_A)  # moves A's head meanwhile
        _write_event(batching, SCOPE_A)
        with batching.read() as tx:
            head = tx.head(SCOPE_A)
        assert head is not None and head.cursor == 4
    assert _events(other, SCOPE_A) == [1, 2, 3, 4]


def test_a_long_batch_commits_in_chunks(stores: tuple[PostgresStore, PostgresStore]) -> None:
    batching, other = stores
    with batching.batch():
        for _ in range(CHUNK_WRITES + 1):
            _write_event(batching, SCOPE_A)
        assert len(_events(other, SCOPE_A)) == CHUNK_WRITES
    assert len(_events(other, SCOPE_A)) == CHUNK_WRITES + 1


def test_every_early_commit_first_has_the_vault_commit_the_keys_its_bodies_need(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores
    seen: list[int] = []  # how many writes the other connection saw when the vault was asked to commit
    with batching.batch(before_commit=lambda: seen.append(len(_events(other, SCOPE_A)))):
        for _ in range(CHUNK_WRITES + 1):
            _write_event(batching, SCOPE_A)
        _write_event(batching, SCOPE_B)
        with batching.write() as tx:
            event(tx, SCOPE_B)
    assert seen == [0, CHUNK_WRITES, CHUNK_WRITES + 1]  # each before the bodies it covers were visible
    assert len(_events(other, SCOPE_A)) == CHUNK_WRITES + 1 and _events(other, SCOPE_B) == [1, 2]


def test_a_vault_that_cannot_commit_fails_the_batch_before_its_bodies_commit(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores

    def vault_lost() -> None:
        raise ContractError(ErrorCode.STORE_UNAVAILABLE)

    with pytest.raises(ContractError) as ended, batching.batch(before_commit=vault_lost):
        _write_event(batching, SCOPE_A)
        with pytest.raises(ContractError) as refused:
            _write_event(batching, SCOPE_B)
        assert refused.value.code is ErrorCode.STORE_UNAVAILABLE
    assert ended.value.code is ErrorCode.MUTATION_OUTCOME_UNKNOWN
    assert _events(other, SCOPE_A) == [] and _events(other, SCOPE_B) == []


def test_a_whole_store_write_inside_a_batch_runs_alone_after_committing_the_batch(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    batching, other = stores
    with batching.batch():
        _write_event(batching, SCOPE_A)
        with batching.write() as tx:  # names no scope: takes the write lock exclusively
            event(tx, SCOPE_B)
        assert _events(other, SCOPE_A) == [1] and _events(other, SCOPE_B) == [1]
        _write_event(batching, SCOPE_A)
    assert _events(other, SCOPE_A) == [1, 2]


def test_a_batch_whose_connection_is_lost_refuses_later_writes_and_ends_unknown(
    stores: tuple[PostgresStore, PostgresStore], pg_url: str
) -> None:
    batching, other = stores
    with pytest.raises(ContractError) as ended, batching.batch():
        _write_event(batching, SCOPE_A)
        with batching.read() as tx:
            pid = tx.connection.execute("SELECT pg_backend_pid()").fetchone()[0]
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        _write_event(batching, SCOPE_A)  # held back: nothing has run on the connection yet
        with pytest.raises(ContractError) as refused, batching.read() as tx:
            tx.head(SCOPE_B)  # a statement: the held rows go first, and the connection is gone
        assert refused.value.code is ErrorCode.STORE_UNAVAILABLE
        with pytest.raises(ContractError):
            _write_event(batching, SCOPE_A)
    assert ended.value.code is ErrorCode.MUTATION_OUTCOME_UNKNOWN
    assert _events(other, SCOPE_A) == []
    _write_event(batching, SCOPE_A)  # the store itself goes on
    assert _events(other, SCOPE_A) == [1]


def _audit(n: int, tenant: str | None) -> AuditRow:
    return AuditRow(audit_id=f"aud_{n}", at_ms=n, tool="engram_memory_capture", outcome="ok", tenant=tenant)


def _audit_ids(pg_url: str) -> list[str]:
    with psycopg.connect(pg_url) as admin:  # the owner: every tenant's rows
        return [row[0] for row in admin.execute("SELECT audit_id FROM audit_log ORDER BY seq").fetchall()]


def test_a_batchs_audit_rows_commit_with_its_writes_of_every_tenant(
    stores: tuple[PostgresStore, PostgresStore], pg_url: str
) -> None:
    batching, _ = stores
    with batching.batch():
        _write_event(batching, SCOPE_A)
        batching.append_audit(_audit(1, SCOPE_A.tenant))
        batching.append_audit(_audit(2, None))  # a call bound to no tenant
        batching.append_audit(_audit(3, SCOPE_B.tenant))  # row-level security checks it as tenant b's
        assert _audit_ids(pg_url) == []  # held back to the batch's commit
        _write_event(batching, SCOPE_B)  # another scope: the batch commits what it held first
        assert sorted(_audit_ids(pg_url)) == ["aud_1", "aud_2", "aud_3"]
        batching.append_audit(_audit(4, SCOPE_B.tenant))
    assert sorted(_audit_ids(pg_url)) == ["aud_1", "aud_2", "aud_3", "aud_4"]


def test_a_batch_of_audit_rows_alone_commits_them_and_a_failed_batch_loses_them_with_its_writes(
    stores: tuple[PostgresStore, PostgresStore], pg_url: str
) -> None:
    batching, other = stores
    with batching.batch():
        batching.append_audit(_audit(1, SCOPE_A.tenant))
    assert _audit_ids(pg_url) == ["aud_1"]
    with pytest.raises(RuntimeError), batching.batch():
        _write_event(batching, SCOPE_A)
        batching.append_audit(_audit(2, SCOPE_A.tenant))
        raise RuntimeError("the caller's own failure")
    assert _audit_ids(pg_url) == ["aud_1"] and _events(other, SCOPE_A) == []
    batching.append_audit(_audit(3, SCOPE_A.tenant))  # outside a batch: written at once
    assert _audit_ids(pg_url) == ["aud_1", "aud_3"]


def test_batches_do_not_nest(stores: tuple[PostgresStore, PostgresStore]) -> None:
    batching, _ = stores
    with batching.batch(), pytest.raises(RuntimeError), batching.batch():
        pass
