"""The semantic index follows the store by what changed (engine/recall/vector_index.py).

The first tests are the index alone; the rest run two engines on one store, each with its own index
(as two `serve` processes have), on both stores: what leaves the store's current set never comes back
from either, both agree on every order, a write costs a search what changed and not the whole scope,
and a store replaced under a running index (a restore) or a failed catch-up leaves the next search right.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.instants import format_instant
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Scope, Store, StoreTx
from engram_memory.engine.recall.semantic import VectorCache
from engram_memory.engine.recall.vector_index import COMPACT_MIN, ScopeIndex, Stamp
from engram_memory.host.compose import store_settings
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.homes import bind, make_home
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import capture_args, unique_key

CAR = "The car needs new tyres before winter."
PARAPHRASE = "automobile maintenance"
OTHERS = [
    "Quarterly invoices are mailed on the first Monday.",
    "Prune the roses in early spring.",
    "The standup moved to half past nine.",
]


# -- the index alone ---------------------------------------------------------------------------------------


def _unit(*values: float) -> Any:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_an_older_snapshot_sees_the_index_as_of_its_own_cursor() -> None:
    index = ScopeIndex(2, Stamp(0, None))
    index.put("a", _unit(1, 0), "", (0, None, None), 1)
    index.stamped(Stamp(1, "d1"))
    index.put("b", _unit(1, 0.1), "", (0, None, None), 2)
    index.drop("a", 2)
    index.stamped(Stamp(2, "d2"))
    query = _unit(1, 0)
    assert [n.record_id for n in index.nearest(query, generation=2, valid_at_ms=0, limit=5)] == ["b"]
    assert [n.record_id for n in index.nearest(query, generation=1, valid_at_ms=0, limit=5)] == ["a"]


def test_validity_and_expiry_are_read_at_the_search_s_valid_time() -> None:
    index = ScopeIndex(2, Stamp(0, None))
    index.put("old", _unit(1, 0), "", (0, 100, None), 1)
    index.put("fading", _unit(1, 0), "", (0, None, 200), 1)
    assert {n.record_id for n in index.nearest(_unit(1, 0), generation=1, valid_at_ms=50, limit=5)} == {"old", "fading"}
    assert [n.record_id for n in index.nearest(_unit(1, 0), generation=1, valid_at_ms=150, limit=5)] == ["fading"]
    assert index.nearest(_unit(1, 0), generation=1, valid_at_ms=250, limit=5) == []


def test_ties_break_by_record_id() -> None:
    index = ScopeIndex(2, Stamp(0, None))
    for record_id in ("c", "a", "b"):
        index.put(record_id, _unit(1, 1), "", (0, None, None), 1)
    assert [n.record_id for n in index.nearest(_unit(1, 1), generation=1, valid_at_ms=0, limit=5)] == ["a", "b", "c"]


def test_compaction_drops_what_left_and_keeps_what_is_current() -> None:
    index = ScopeIndex(2, Stamp(0, None))
    for n in range(COMPACT_MIN * 2):
        index.put(f"r{n:05d}", _unit(1, n), "", (0, None, None), 1)
    for n in range(COMPACT_MIN):
        index.drop(f"r{n:05d}", 2)
    index.stamped(Stamp(2, "d2"))  # a quarter or more left: compacted
    assert len(index) == COMPACT_MIN
    found = index.nearest(_unit(1, 0), generation=2, valid_at_ms=0, limit=COMPACT_MIN * 2)
    assert sorted(n.record_id for n in found) == [f"r{n:05d}" for n in range(COMPACT_MIN, COMPACT_MIN * 2)]


# -- two engines on one store, each with an index of its own ----------------------------------------------------


@pytest.fixture
def two(paths: HostPaths, clock: ManualClock) -> Iterator[tuple[InProcessAgent, InProcessAgent, Engine]]:
    """Two agents of one workspace, each on an engine with its own index, and the host's engine."""
    runtime = store_settings(paths).is_postgres
    with (
        steered_engine(paths, clock=clock) as host,
        steered_engine(paths, clock=clock, runtime=runtime) as first,
        steered_engine(paths, clock=clock, runtime=runtime) as second,
    ):
        binding = bind(paths).binding
        yield InProcessAgent(first, binding), InProcessAgent(second, binding), host


def _agree(one: InProcessAgent, other: InProcessAgent, query: str) -> list[str]:
    """The ids both engines answer, after checking they answer the same order with the same digest."""
    a, b = one.search(query), other.search(query)
    assert a["rank_receipt"]["ordered_ids_digest"] == b["rank_receipt"]["ordered_ids_digest"]
    ids = [p["record"]["record_id"] for p in a["records"]]
    assert ids == [p["record"]["record_id"] for p in b["records"]]
    return ids


def _forget(agent: InProcessAgent, host: Engine, record_id: str) -> None:
    args = {"record_id": record_id, "idempotency_key": unique_key("forget"), "reason_ref": "reason:test"}
    assert agent.error_code("engram_memory_forget", args) == "gate_failed"
    host.approve_confirmation(host.confirmations()[0][0].confirmation_id, decided_by="host:test", ttl_ms=60_000)
    agent.value("engram_memory_forget", args)


def test_a_record_forgotten_through_one_engine_is_never_returned_by_either(
    two: tuple[InProcessAgent, InProcessAgent, Engine],
) -> None:
    first, second, host = two
    car = first.remember(CAR)
    for text in OTHERS:
        second.remember(text)
    assert _agree(first, second, PARAPHRASE)[:1] == [car]  # both indexes hold it now
    _forget(second, host, car)
    assert car not in _agree(first, second, PARAPHRASE)


@pytest.mark.parametrize("leave", ["supersede", "mark_non_current", "tombstone", "expire"])
def test_a_record_the_host_moves_out_of_current_leaves_both_indexes(
    two: tuple[InProcessAgent, InProcessAgent, Engine], leave: str
) -> None:
    first, second, host = two
    car = first.remember(CAR)
    successor = second.remember("The car got winter tyres in November.")
    for text in OTHERS:
        first.remember(text)
    assert car in _agree(first, second, PARAPHRASE)
    arguments = {"successor_id": successor} if leave == "supersede" else {}
    host.transition(leave, car, decided_by="host:test", **arguments)
    assert car not in _agree(first, second, PARAPHRASE)


def test_a_rewound_record_comes_back_to_both_indexes(two: tuple[InProcessAgent, InProcessAgent, Engine]) -> None:
    first, second, host = two
    car = first.remember(CAR)
    for text in OTHERS:
        second.remember(text)
    host.transition("mark_non_current", car, decided_by="host:test")
    assert car not in _agree(first, second, PARAPHRASE)
    host.transition("rewind", car, decided_by="host:test")
    assert _agree(first, second, PARAPHRASE)[:1] == [car]


def test_a_record_past_its_retention_is_not_returned_even_before_housekeeping(
    two: tuple[InProcessAgent, InProcessAgent, Engine], clock: ManualClock
) -> None:
    first, second, _ = two
    expires = format_instant(clock.now + 60_000)
    args = capture_args(CAR, retention={"derivative_rule": "make-ineligible", "expires_at": expires})
    candidate = first.value("engram_memory_capture", args)["candidate_id"]
    car = first.admit(candidate)["record_id"]
    for text in OTHERS:
        second.remember(text)
    assert _agree(first, second, PARAPHRASE)[:1] == [car]
    clock.advance(120_000)
    assert car not in _agree(first, second, PARAPHRASE)


def test_an_agent_finds_its_own_admitted_memory_through_the_other_engine_at_once(
    two: tuple[InProcessAgent, InProcessAgent, Engine],
) -> None:
    first, second, _ = two
    for text in OTHERS:
        first.remember(text)
    assert _agree(first, second, PARAPHRASE) == []  # both indexes are built; nothing there is about cars
    candidate = first.value("engram_memory_capture", capture_args(CAR))["candidate_id"]
    args = {"candidate_id": candidate, "idempotency_key": unique_key("admit")}
    car = first.value("engram_memory_request_admission", args)["outcome"]["record_id"]  # no wait for a vector
    assert second.found_ids(PARAPHRASE)[:1] == [car]
    assert _agree(first, second, PARAPHRASE)[:1] == [car]


# -- what a write costs a search ---------------------------------------------------------------------------------


class _Counting:
    """The engine's real store, counting the read transactions that load a whole scope's vectors."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.full_loads = 0
        self.fail_catch_up = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    @contextmanager
    def read(self, *, scope: Scope | None = None) -> Iterator[StoreTx]:
        with self._store.read(scope=scope) as tx:
            yield _CountingTx(tx, self)  # type: ignore[misc]


class _CountingTx:
    def __init__(self, tx: StoreTx, counter: _Counting) -> None:
        self._tx = tx
        self._counter = counter

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tx, name)

    def vectors(self, *args: Any) -> Any:
        self._counter.full_loads += 1
        return self._tx.vectors(*args)

    def record_changes(self, *args: Any) -> Any:
        if self._counter.fail_catch_up:
            self._counter.fail_catch_up = False
            raise ContractError(ErrorCode.STORE_UNAVAILABLE)
        return self._tx.record_changes(*args)


@pytest.fixture
def counted(paths: HostPaths, clock: ManualClock) -> Iterator[tuple[InProcessAgent, _Counting]]:
    runtime = store_settings(paths).is_postgres
    with steered_engine(paths, clock=clock, runtime=runtime) as engine:
        counting = _Counting(engine.deps.store)
        object.__setattr__(engine.deps, "store", counting)
        yield InProcessAgent(engine, bind(paths).binding), counting


def test_writes_between_searches_never_reload_the_scope(counted: tuple[InProcessAgent, _Counting]) -> None:
    agent, counting = counted
    for text in OTHERS:
        agent.remember(text)
    agent.search(PARAPHRASE)
    assert counting.full_loads == 1
    for n in range(5):
        agent.remember(f"Note {n}: the staging database is refreshed on Sundays.")
        agent.search(PARAPHRASE)
    car = agent.remember(CAR)
    assert agent.found_ids(PARAPHRASE)[:1] == [car]
    assert counting.full_loads == 1


def test_a_catch_up_that_fails_leaves_the_next_search_right_injected_fault(
    counted: tuple[InProcessAgent, _Counting],
) -> None:
    agent, counting = counted
    for text in OTHERS:
        agent.remember(text)
    before = agent.search(PARAPHRASE)["rank_receipt"]["through_cursor"]
    car = agent.remember(CAR)
    counting.fail_catch_up = True  # the store commit happened; the index update fails half-way
    assert agent.error_code("engram_memory_search", {"query": PARAPHRASE, "purpose_ref": "purpose:tests"}) == (
        "STORE_UNAVAILABLE"
    )
    value = agent.search(PARAPHRASE)
    assert value["rank_receipt"]["through_cursor"] > before
    assert value["records"][0]["record"]["record_id"] == car


# -- a store replaced under a running index ------------------------------------------------------------------------


def test_an_index_built_on_one_journal_is_rebuilt_for_another_with_the_same_cursor(
    paths: HostPaths, tmp_path: Any, clock: ManualClock
) -> None:
    """As after a restore: the scope's records cursor may come back to a value the index saw, on another
    journal. The digest at the index's cursor tells them apart."""
    if store_settings(paths).is_postgres:
        pytest.skip("one store suffices: the stamp is the store's journal, read the same way by both")
    elsewhere = make_home(tmp_path / "elsewhere")
    with steered_engine(paths, clock=clock) as here:
        shared: VectorCache | None = here.deps.semantic
        assert shared is not None
        mine = InProcessAgent(here, bind(paths).binding)
        car = mine.remember(CAR)
        mine.remember(OTHERS[0])
        assert mine.found_ids(PARAPHRASE)[:1] == [car]
        with steered_engine(elsewhere, clock=clock, cache=shared) as there:
            theirs = InProcessAgent(there, bind(elsewhere).binding)
            truck = theirs.remember("The truck fleet is serviced every spring.")
            theirs.remember(OTHERS[1])  # the same records cursor as `here`, another journal
            assert theirs.found_ids(PARAPHRASE) and car not in theirs.found_ids(PARAPHRASE)
            assert theirs.found_ids(PARAPHRASE)[:1] == [truck]
