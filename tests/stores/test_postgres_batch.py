"""The PostgreSQL store's batches: a thread's writes as savepoints of shared, pipelined transactions.

What another connection sees is read from a second store on the same database, never inferred from
timing; the batch's lost connection is a real backend terminated by the server.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.ports.store import Scope
from engram_memory.stores.postgres.batching import CHUNK_WRITES
from engram_memory.stores.postgres.store import PostgresStore
from tests.stores.builders import SCOPE_A, SCOPE_B, event


@pytest.fixture
def stores(pg_url: str) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    batching, other = PostgresStore(pg_url), PostgresStore(pg_url)
    try:
        yield batching, other
    finally:
        batching.close()
        other.close()


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
        with pytest.raises(ContractError) as refused:
            _write_event(batching, SCOPE_A)
        assert refused.value.code is ErrorCode.STORE_UNAVAILABLE
        with pytest.raises(ContractError):
            _write_event(batching, SCOPE_A)
    assert ended.value.code is ErrorCode.MUTATION_OUTCOME_UNKNOWN
    assert _events(other, SCOPE_A) == []
    _write_event(batching, SCOPE_A)  # the store itself goes on
    assert _events(other, SCOPE_A) == [1]


def test_batches_do_not_nest(stores: tuple[PostgresStore, PostgresStore]) -> None:
    batching, _ = stores
    with batching.batch(), pytest.raises(RuntimeError), batching.batch():
        pass
