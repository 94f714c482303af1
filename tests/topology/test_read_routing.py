"""Searches and gets answered by hot standbys, never missing the same process's writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from engram_memory.engine.ports.faults import TransientConflict
from engram_memory.engine.ports.rows import Scope
from engram_memory.host.compose import open_engine
from engram_memory.stores.postgres.store import PostgresStore
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE
from tests.support.replica_load import note, team_load
from tests.support.topology import Topology
from tests.topology.conftest import topology_home

pytestmark = pytest.mark.slow

SEARCH = "engram_memory_search"
GET = "engram_memory_get"


def _found(agent: InProcessAgent, query: str) -> list[str]:
    value = agent.value(SEARCH, {"query": query, "purpose_ref": PURPOSE})
    return [packet["record"]["record_id"] for packet in value["records"]]


def test_a_read_after_the_same_process_write_never_misses_it(tmp_path: Path, replicated: Topology) -> None:
    paths = topology_home(tmp_path / "home", replicated, database="ryw", keys="ryw_keys")
    issued = bind(paths)
    with open_engine(paths, runtime=True, semantic=False) as engine:
        store = engine.deps.store
        assert isinstance(store, PostgresStore)
        agent = InProcessAgent(engine, issued.binding)
        for round_ in range(25):
            record_id = agent.remember(f"Deploy window {round_} is Tuesday 14:00 for the payments service.")
            assert record_id in _found(agent, f"deploy window {round_}"), round_
            assert agent.value(GET, {"record_id": record_id, "purpose_ref": PURPOSE})["record"]
        stats = store.routing_stats()
    assert stats is not None
    assert stats.standby_reads >= 40, stats
    assert stats.fallbacks <= stats.standby_reads, stats


def test_another_process_can_read_stale_where_the_writer_never_does(tmp_path: Path, replicated: Topology) -> None:
    """Both read from the standby replaying 1.5 s late. The reader without the writer's positions misses
    what was just written (the test can see staleness); the writer's own reads, carrying its positions,
    never do: they wait for the standby, then go to the primary."""
    late = replicated.standbys[-1]
    paths = topology_home(tmp_path / "home", replicated, database="stale", keys="stale_keys", standbys=[late])
    issued = bind(paths)
    with (
        open_engine(paths, runtime=True, semantic=False) as writer_engine,
        open_engine(paths, runtime=True, semantic=False) as reader_engine,
    ):
        writer = InProcessAgent(writer_engine, issued.binding)
        reader = InProcessAgent(reader_engine, issued.binding)
        own_misses = other_misses = 0
        for round_ in range(20):
            word = f"zebra{round_}quokka"
            record_id = writer.remember(f"The {word} runbook lives in the ops wiki.")
            other_misses += record_id not in _found(reader, word)
            own_misses += record_id not in _found(writer, word)
    assert own_misses == 0
    assert other_misses >= 15


def test_reads_go_on_when_a_standby_stops(tmp_path: Path, replicated: Topology) -> None:
    paths = topology_home(tmp_path / "home", replicated, database="stops", keys="stops_keys")
    issued = bind(paths)
    with open_engine(paths, runtime=True, semantic=False) as engine:
        agent = InProcessAgent(engine, issued.binding)
        record_id = agent.remember("The on-call phone is in the second drawer.")
        assert record_id in _found(agent, "on-call phone")
        replicated.standbys[0].crash()
        try:
            for _ in range(10):
                assert record_id in _found(agent, "on-call phone")
        finally:
            replicated.standbys[0].start()
        store = engine.deps.store
        assert isinstance(store, PostgresStore)
        stats = store.routing_stats()
    assert stats is not None and stats.failures >= 1, stats


def test_the_semantic_index_answers_from_standbys(tmp_path: Path, replicated: Topology) -> None:
    """Hybrid search on standbys: the semantic channel finds a paraphrase, in another language too, right
    after the write, and stops finding a record once it is forgotten."""
    paths = topology_home(tmp_path / "home", replicated, database="semantic", keys="semantic_keys")
    issued = bind(paths)
    with open_engine(paths, runtime=True) as engine:
        assert engine.deps.semantic is not None
        agent = InProcessAgent(engine, issued.binding)
        car = agent.remember("자동차는 겨울이 오기 전에 새 타이어가 필요하다.")
        agent.remember("Quarterly invoices are mailed on the first Monday.")
        value = agent.value(SEARCH, {"query": "When should the vehicle get fresh tires?", "purpose_ref": PURPOSE})
        assert value["rank_receipt"]["profile"] == "hybrid-convex"
        assert [packet["record"]["record_id"] for packet in value["records"]][:1] == [car]
        store = engine.deps.store
        assert isinstance(store, PostgresStore)
        stats = store.routing_stats()
        assert stats is not None and stats.standby_reads >= 1, stats


def test_standbys_answer_most_of_a_writing_team_s_searches(tmp_path: Path, replicated: Topology) -> None:
    """bench/replicas.py's steady state, short: three agents search, and every fifth step one writes a
    note and searches for it at once. The late standby is left alone once it cannot keep up."""
    paths = topology_home(tmp_path / "home", replicated, database="team", keys="team_keys")
    issued = bind(paths)
    with open_engine(paths, runtime=True, semantic=False) as engine:
        agent = InProcessAgent(engine, issued.binding)
        agent.remember_many([note(number)[0] for number in range(200)])
        figures = team_load(engine, issued.binding, replicated.primary, agents=3, seconds=4.0, write_every=5, first=200)
    assert figures.writes >= 5 and figures.stale == 0, figures
    assert figures.standby_share >= 0.8, figures.routing


def test_a_read_a_recovery_conflict_cancels_runs_again_elsewhere(tmp_path: Path) -> None:
    """A standby without feedback, which cancels its readers at once for the primary's VACUUM: the search it
    held open fails there, and the engine's next try is answered elsewhere, never an error to the agent."""
    impatient = {"hot_standby_feedback": "off", "max_standby_streaming_delay": "0"}
    with Topology.built(standbys=1, standby_settings=impatient) as topology:
        paths = topology_home(tmp_path / "home", topology, database="conflict", keys="conflict_keys")
        issued = bind(paths)
        with open_engine(paths, runtime=True, semantic=False) as engine:
            agent = InProcessAgent(engine, issued.binding)
            record_id = agent.remember("The canary deploy runs at 09:00 on weekdays.")
            topology.caught_up()
            store = engine.deps.store
            assert isinstance(store, PostgresStore)
            scope = Scope(issued.binding.tenant, issued.binding.workspace)
            with pytest.raises(TransientConflict), store.read(scope=scope) as tx:
                assert tx.head(scope) is not None  # the snapshot is taken on the standby
                _churn(topology)  # rows this snapshot sees are vacuumed away on the primary, then replayed
                tx.head(scope)
            assert record_id in _found(agent, "canary deploy")  # the rerun went to the primary
            stats = store.routing_stats()
    assert stats is not None and stats.failures >= 1, stats


def _churn(topology: Topology) -> None:
    with topology.primary.connect("conflict", "engram_owner") as db:
        db.execute("UPDATE scopes SET head_cursor = head_cursor")
        db.execute("VACUUM scopes")
    topology.caught_up()
