"""Large scopes' vectors in files every process maps (engine/recall/shared_index.py, shared_builds.py).

Two engines on one store share one folder of files (as two `serve` processes of a host do), with the
threshold lowered so that a scope of a dozen memories gets its base, and the files written in the
calling thread (no timing). On both stores: a base changes no answer (at this size the graph proposes
every row, so results must be exactly those of exact search); what changed after it is found; a
forgotten record is never returned and its vector leaves the files; a base written from another
journal is never used; a new process answers from the base without reading the scope's vectors.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engram_memory.contract.instants import format_instant
from engram_memory.embeddings.loader import load_model
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.semantic import VectorCache
from engram_memory.engine.recall.shared_builds import SharedBases
from engram_memory.engine.recall.shared_index import BaseFiles
from engram_memory.host.compose import store_settings
from engram_memory.host.settings import HostPaths
from tests.engine.recall.test_vector_index import _Counting
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.homes import bind, make_home
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import capture_args, unique_key

SHARED_FROM = 8
CAR = "The car needs new tyres before winter."
PARAPHRASE = "automobile maintenance"
NOTES = [
    "Quarterly invoices are mailed on the first Monday.",
    "Prune the roses in early spring.",
    "The standup moved to half past nine.",
    "새 서비스는 PostgreSQL 데이터베이스를 사용해야 합니다.",
    "每周五下午部署到生产环境。",
    "当番のローテーションは毎週月曜日に交代します。",
    "The Terraform state file is kept in the shared storage bucket.",
    "Backups of the billing database are restored every quarter as a drill.",
    "The office closes early on the last Friday of the month.",
    "New hires get their laptops from the IT desk on their first day.",
]


def _model() -> Any:
    model = load_model()
    assert model is not None
    return model


def _shared(folder: Path) -> SharedBases:
    return SharedBases(BaseFiles(folder), shared_from=SHARED_FROM, background=False)


class Site:
    def __init__(self, paths: HostPaths, clock: ManualClock, folder: Path) -> None:
        self.paths, self.clock, self.folder = paths, clock, folder
        self.scope = Scope("tenant-a", "workspace-1")
        self.binding = bind(paths).binding
        self.runtime = store_settings(paths).is_postgres

    def engine(self, *, shared: bool = True, owner: bool = False) -> Any:
        """An agents' engine (the runtime role on PostgreSQL), or the host's (`owner`: verify reads every tenant)."""
        cache = VectorCache(_model(), _shared(self.folder) if shared else None)
        return steered_engine(self.paths, clock=self.clock, runtime=self.runtime and not owner, cache=cache)

    def files(self) -> BaseFiles:
        return BaseFiles(self.folder)


@pytest.fixture
def site(paths: HostPaths, clock: ManualClock, tmp_path: Path) -> Site:
    return Site(paths, clock, tmp_path / "vectors")


def _ids(agent: InProcessAgent, query: str) -> tuple[list[str], str]:
    value = agent.search(query, limit=50)
    return [p["record"]["record_id"] for p in value["records"]], value["rank_receipt"]["ordered_ids_digest"]


def _forget(agent: InProcessAgent, host: Engine, record_id: str) -> None:
    args = {"record_id": record_id, "idempotency_key": unique_key("forget"), "reason_ref": "reason:test"}
    assert agent.error_code("engram_memory_forget", args) == "gate_failed"
    host.approve_confirmation(host.confirmations()[0][0].confirmation_id, decided_by="host:test", ttl_ms=60_000)
    agent.value("engram_memory_forget", args)


def _file_bytes(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file())


def test_a_base_changes_no_answer_and_follows_what_changed_after_it(site: Site) -> None:
    with (
        site.engine() as shared_engine,
        site.engine(shared=False) as exact_engine,
        steered_engine(site.paths, clock=site.clock) as host,
    ):
        shared, exact = InProcessAgent(shared_engine, site.binding), InProcessAgent(exact_engine, site.binding)
        car = shared.remember(CAR)
        for text in NOTES:
            exact.remember(text)
        assert site.files().current(site.scope, shared_engine.deps.semantic.vector_id) is None
        first = _ids(shared, PARAPHRASE)  # past the threshold: this search writes the base
        assert site.files().current(site.scope, shared_engine.deps.semantic.vector_id) is not None
        for query in (PARAPHRASE, "which database for new services", "deploy schedule", "billing"):
            assert _ids(shared, query) == _ids(exact, query)
        assert _ids(shared, PARAPHRASE) == first
        later = exact.remember("Winter tyres were fitted to the van in November.")
        host.transition("mark_non_current", car, decided_by="host:test")
        found, digest = _ids(shared, PARAPHRASE)
        assert later in found and car not in found
        assert (found, digest) == _ids(exact, PARAPHRASE)
        host.transition("rewind", car, decided_by="host:test")
        assert _ids(shared, PARAPHRASE) == _ids(exact, PARAPHRASE)
        assert car in _ids(shared, PARAPHRASE)[0]


def test_a_record_of_the_base_past_its_expiry_is_no_longer_returned(site: Site) -> None:
    """While every row of a base is valid the search reads no validity column; once the clock passes one
    row's expiry, that row drops out, as it does from exact search."""
    with site.engine() as shared_engine, site.engine(shared=False) as exact_engine:
        shared, exact = InProcessAgent(shared_engine, site.binding), InProcessAgent(exact_engine, site.binding)
        expires = format_instant(site.clock.now + 60_000)
        args = capture_args(CAR, retention={"derivative_rule": "make-ineligible", "expires_at": expires})
        car = shared.admit(shared.value("engram_memory_capture", args)["candidate_id"])["record_id"]
        for text in NOTES:
            exact.remember(text)
        first = _ids(shared, PARAPHRASE)  # past the threshold: this search writes the base
        assert site.files().current(site.scope, shared_engine.deps.semantic.vector_id) is not None
        site.clock.advance(30_000)
        assert _ids(shared, PARAPHRASE) == _ids(exact, PARAPHRASE)
        assert first[0][:1] == [car] == _ids(shared, PARAPHRASE)[0][:1]
        site.clock.advance(60_000)
        found = _ids(shared, PARAPHRASE)
        assert car not in found[0]  # the notes beside it are about nothing the query asks
        assert found == _ids(exact, PARAPHRASE)


def test_a_forgotten_record_is_never_returned_and_its_vector_leaves_the_files(site: Site) -> None:
    with site.engine() as one, site.engine() as two, steered_engine(site.paths, clock=site.clock) as host:
        first, second = InProcessAgent(one, site.binding), InProcessAgent(two, site.binding)
        car = first.remember(CAR)
        for text in NOTES:
            first.remember(text)
        assert _ids(first, PARAPHRASE)[0][:1] == [car]  # the base is written, with the car in it
        assert _ids(second, PARAPHRASE)[0][:1] == [car]  # the other engine answers from the same base
        vector_id = one.deps.semantic.vector_id
        with one.deps.store.read() as tx:
            stored = tx.vectors_of(site.scope, vector_id, [car])[car]
        folder = site.files().folder(site.scope, vector_id)
        assert stored in _file_bytes(folder)
        _forget(second, host, car)
        assert car not in _ids(second, PARAPHRASE)[0]  # the forget erased it from the files
        assert car not in _ids(first, PARAPHRASE)[0]
        assert stored not in _file_bytes(folder)
        written = site.files().current(site.scope, vector_id)
        _ids(first, PARAPHRASE), _ids(second, PARAPHRASE)
        assert site.files().current(site.scope, vector_id) == written  # erased in place: no new generation
        base = site.files().open(site.scope, vector_id, one.deps.semantic.dimension)
        assert base is not None
        row = base.row_of(car)
        assert row is not None and not np.any(base.vectors_of([row]))
        faiss: Any = importlib.import_module("faiss")  # untyped: its stubs lack these SWIG classes
        graph = faiss.read_index(str(base.folder / "graph.faiss"))  # read whole, as a new process would
        storage = faiss.downcast_index(graph.storage)
        codes = faiss.rev_swig_ptr(storage.codes.data(), storage.codes.size()).reshape(base.rows, -1)
        assert not np.any(codes[row]) and all(np.any(codes[other]) for other in range(base.rows) if other != row)


def test_a_new_process_answers_from_the_base_without_reading_the_scope(site: Site) -> None:
    with site.engine() as writer:
        agent = InProcessAgent(writer, site.binding)
        for text in [CAR, *NOTES]:
            agent.remember(text)
        expected = _ids(agent, PARAPHRASE)
    with site.engine() as reader:
        counting = _Counting(reader.deps.store)
        object.__setattr__(reader.deps, "store", counting)
        assert _ids(InProcessAgent(reader, site.binding), PARAPHRASE) == expected
        assert counting.full_loads == 0


def test_a_base_from_another_journal_is_never_used(site: Site, tmp_path: Path, clock: ManualClock) -> None:
    with site.engine() as engine:
        agent = InProcessAgent(engine, site.binding)
        for text in [CAR, *NOTES]:
            agent.remember(text)
        _ids(agent, PARAPHRASE)  # writes the base of this store's workspace
    other = make_home(tmp_path / "other")  # another store, the same tenant and workspace names
    other_site = Site(other, clock, site.folder)  # and the same folder of files
    with other_site.engine() as engine, other_site.engine(shared=False) as exact_engine:
        agent = InProcessAgent(engine, other_site.binding)
        own = [agent.remember(f"{text} (second office)") for text in [*NOTES, "Parking permits renew in March."]]
        vector_id = engine.deps.semantic.vector_id
        with engine.deps.store.read() as tx:
            head = tx.head(other_site.scope)
            assert head is not None and head.records_cursor >= _base_cursor(site, vector_id)  # old enough to use
        found = _ids(agent, PARAPHRASE)
        assert set(found[0]) <= set(own)
        assert found == _ids(InProcessAgent(exact_engine, other_site.binding), PARAPHRASE)


def _base_cursor(site: Site, vector_id: str) -> int:
    name = site.files().current(site.scope, vector_id)
    assert name is not None
    return int(name[1:].split("-", 1)[0])


def test_verify_finds_a_forgotten_record_s_vector_left_in_the_files(site: Site) -> None:
    with (
        site.engine() as shared_engine,
        site.engine(shared=False) as exact_engine,
        site.engine(owner=True) as host,
    ):
        shared, exact = InProcessAgent(shared_engine, site.binding), InProcessAgent(exact_engine, site.binding)
        car = shared.remember(CAR)
        for text in NOTES:
            shared.remember(text)
        _ids(shared, PARAPHRASE)  # the base is written, with the car in it
        assert host.verify(full=True).ok
        _forget(exact, host, car)  # through a process that does not read the files: nothing erases it there yet
        problems = host.verify(full=True).problems
        assert [(p.code.value, p.subject) for p in problems] == [("PROJECTION_STALE", car)]
        assert car not in _ids(shared, PARAPHRASE)[0]  # this catch-up erases it
        assert host.verify(full=True).ok
