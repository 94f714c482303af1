"""PostgreSQL writers queue per scope: writers of other scopes commit beside a writer that holds its scope,
writers of the same scope wait for it, and a writer of the whole store waits for every one of them.

Waiting is observed, never timed: the server's own lock table shows a writer's advisory lock not granted
while the holder is still inside its transaction.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest

from engram_memory.engine.ports.store import Scope
from engram_memory.stores.postgres import store as postgres_store
from engram_memory.stores.postgres.store import WRITE_LOCK, PostgresStore, scope_lock_key
from tests.stores.builders import SCOPE_A, SCOPE_A2, SCOPE_B, event

DEADLINE_S = 30.0


def _waiting_advisory_locks(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted").fetchone()
    return int(row[0]) if row else 0


def _until(condition: Callable[[], bool]) -> bool:
    waited = threading.Event()
    for _ in range(int(DEADLINE_S / 0.02)):
        if condition():
            return True
        waited.wait(0.02)
    return False


@contextmanager
def _held(store: PostgresStore, scopes: list[Scope] | None) -> Iterator[None]:
    """A writer inside its transaction (one event per scope appended) until the block ends; then it commits."""
    inside, release, failures = threading.Event(), threading.Event(), []

    def hold() -> None:
        try:
            with store.write(scopes=scopes) as tx:
                for scope in scopes or [SCOPE_A]:
                    event(tx, scope)
                inside.set()
                release.wait(DEADLINE_S)
        except BaseException as exc:
            failures.append(exc)
            inside.set()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert inside.wait(DEADLINE_S) and not failures, failures
        yield
    finally:
        release.set()
        holder.join()
    assert not failures, failures


def _commit_in_thread(
    store: PostgresStore, scopes: list[Scope] | None, scope: Scope
) -> tuple[threading.Thread, list[int]]:
    """A writer started in a thread; the cursor it wrote lands in the list once it committed."""
    done: list[int] = []

    def write() -> None:
        with store.write(scopes=scopes) as tx:
            done.append(event(tx, scope).cursor)

    thread = threading.Thread(target=write)
    thread.start()
    return thread, done


@pytest.fixture
def stores(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[PostgresStore, PostgresStore]]:
    monkeypatch.setattr(postgres_store, "LOCK_TIMEOUT", f"{int(DEADLINE_S)}s")
    first, second = PostgresStore(pg_url), PostgresStore(pg_url)  # two pools: two processes, as the server sees it
    try:
        yield first, second
    finally:
        first.close()
        second.close()


def test_a_writer_of_another_scope_commits_while_one_scope_is_held(
    stores: tuple[PostgresStore, PostgresStore], pg_url: str
) -> None:
    first, second = stores
    with _held(first, [SCOPE_A]):
        for scope in (SCOPE_B, SCOPE_A2):  # another tenant, and another workspace of the same tenant
            with second.write(scopes=[scope]) as tx:
                assert event(tx, scope).cursor == 1
        assert _waiting_advisory_locks(pg_url) == 0
        with second.read() as tx:
            assert tx.head(SCOPE_B) is not None and tx.head(SCOPE_A) is None  # B committed, A not yet
    with first.read() as tx:
        assert [e.cursor for e in tx.events(SCOPE_A)] == [1]


def test_writers_of_one_scope_still_queue_and_the_second_sees_the_first(
    stores: tuple[PostgresStore, PostgresStore], pg_url: str
) -> None:
    first, second = stores
    with _held(first, [SCOPE_A]):
        waiter, done = _commit_in_thread(second, [SCOPE_A], SCOPE_A)
        assert _until(lambda: _waiting_advisory_locks(pg_url) == 1)
        assert done == []  # still waiting while the holder is inside
    waiter.join()
    assert done == [2]  # it ran after the first committed and extended its chain


def test_a_writer_of_the_whole_store_waits_for_a_scope_writer_and_holds_every_scope_back(
    stores: tuple[PostgresStore, PostgresStore], pg_url: str
) -> None:
    first, second = stores
    with _held(first, [SCOPE_A]):
        whole, whole_done = _commit_in_thread(second, None, SCOPE_B)
        assert _until(lambda: _waiting_advisory_locks(pg_url) == 1)
        assert whole_done == []
    whole.join()
    assert whole_done == [1]
    with _held(first, None):
        other, other_done = _commit_in_thread(second, [SCOPE_B], SCOPE_B)
        assert _until(lambda: _waiting_advisory_locks(pg_url) == 1)
        assert other_done == []
    other.join()
    assert other_done == [2]


def test_a_writer_of_several_scopes_takes_each_and_blocks_only_those(
    stores: tuple[PostgresStore, PostgresStore], pg_url: str
) -> None:
    first, second = stores
    with _held(first, [SCOPE_B, SCOPE_A]):
        with second.write(scopes=[SCOPE_A2]) as tx:
            event(tx, SCOPE_A2)
        blocked, done = _commit_in_thread(second, [SCOPE_B], SCOPE_B)
        assert _until(lambda: _waiting_advisory_locks(pg_url) == 1)
        assert done == []
    blocked.join()
    assert done == [2]


def test_scope_lock_keys_differ_per_scope_and_from_the_write_lock() -> None:
    keys = {scope_lock_key(scope) for scope in (SCOPE_A, SCOPE_A2, SCOPE_B, Scope("tenant-a\x00x", "y"))}
    assert len(keys) == 4 and WRITE_LOCK not in keys
    assert scope_lock_key(SCOPE_A) == scope_lock_key(Scope("tenant-a", "workspace-1"))
    assert all(-(2**63) <= key < 2**63 for key in keys)
