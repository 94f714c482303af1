"""The migration of a store's derived indexes (engine/recall/reindex.py): scopes indexed by the first tokenizer
are refused to search, re-tokenized scope by scope, and verify clean afterwards; missing vectors are
embedded. Both stores, through the Engine's own methods.
"""

from __future__ import annotations

from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.reindex import LEGACY_TOKENIZER, ReindexProgress
from engram_memory.engine.recall.text import tokenizer_id
from engram_memory.engine.verify import verify_store
from engram_memory.host.settings import HostPaths
from tests.engine.test_languages import ENGLISH, JAPANESE, KOREAN, TRADITIONAL
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.legacy_index import make_legacy
from tests.support.raw import raw_store

SCOPE = Scope(tenant="tenant-a", workspace="workspace-1")
OTHER = Scope(tenant="tenant-a", workspace="workspace-2")
CJK = KOREAN + TRADITIONAL + JAPANESE


def _stored_tokenizer(paths: HostPaths, scope: Scope) -> str | None:
    with raw_store(paths) as db:
        value = db.value(
            "SELECT tokenizer FROM scopes WHERE tenant = ? AND workspace = ?", (scope.tenant, scope.workspace)
        )
    return None if value is None else str(value)


def _legacy_site(paths: HostPaths, agent: InProcessAgent, steered: Engine) -> list[str]:
    ids = [agent.remember(text) for text in CJK + ENGLISH]
    changed = make_legacy(paths, steered, SCOPE)
    assert changed == len(CJK)  # English entries read the same under both tokenizers
    return ids


def test_a_new_scope_takes_the_tokenizer_of_its_first_entry(paths: HostPaths, agent: InProcessAgent) -> None:
    agent.remember(KOREAN[0])
    assert _stored_tokenizer(paths, SCOPE) == tokenizer_id()


def test_search_answers_projection_stale_when_scope_was_indexed_by_the_first_tokenizer(
    paths: HostPaths, agent: InProcessAgent, steered: Engine
) -> None:
    _legacy_site(paths, agent, steered)
    assert agent.error_code("engram_memory_search", {"query": "데이터베이스", "purpose_ref": "purpose:tests"}) == (
        "PROJECTION_STALE"
    )
    status = steered.index_status()
    assert status.stale_scopes == (SCOPE,) and status.stale_records == len(CJK) + len(ENGLISH)
    assert not status.current and status.tokenizer == tokenizer_id()


def test_verify_names_the_stale_tokenizer_once_when_scope_awaits_reindex(
    paths: HostPaths, agent: InProcessAgent, steered: Engine
) -> None:
    _legacy_site(paths, agent, steered)
    report = verify_store(steered.deps, full=True)
    assert [problem.code.value for problem in report.problems] == ["PROJECTION_STALE"]
    assert LEGACY_TOKENIZER in report.problems[0].line and "engram-memory reindex" in report.problems[0].line
    quick = verify_store(steered.deps, full=False)
    assert [problem.code.value for problem in quick.problems] == ["PROJECTION_STALE"]


def test_reindex_moves_a_legacy_scope_and_verify_passes(
    paths: HostPaths, agent: InProcessAgent, steered: Engine
) -> None:
    ids = _legacy_site(paths, agent, steered)
    seen: list[ReindexProgress] = []
    report = steered.reindex(seen.append)
    assert (report.scopes, report.retokenized, report.unreadable) == (1, len(CJK), 0)
    assert seen and seen[-1].phase == "lexical" and seen[-1].done == seen[-1].total == len(CJK) + len(ENGLISH)
    assert _stored_tokenizer(paths, SCOPE) == tokenizer_id()
    assert steered.index_status().current
    assert verify_store(steered.deps, full=True).ok
    assert agent.found_ids("데이터베이스로 백업하는 팀은?")[0] == ids[0]
    assert agent.found_ids("资料库每天备份到哪里")[0] == ids[len(KOREAN)]
    assert agent.found_ids("勉強会はどこで開かれますか")[0] == ids[len(KOREAN) + len(TRADITIONAL) + 2]


def test_reindex_does_nothing_when_run_again(paths: HostPaths, agent: InProcessAgent, steered: Engine) -> None:
    _legacy_site(paths, agent, steered)
    steered.reindex()
    again = steered.reindex()
    assert (again.scopes, again.retokenized, again.embedded, again.unreadable) == (0, 0, 0, 0)


def test_reindex_leaves_other_scopes_alone_when_only_one_is_stale(
    paths: HostPaths, agent: InProcessAgent, steered: Engine
) -> None:
    other = InProcessAgent(agent.engine, bind(paths, workspace="workspace-2").binding)
    kept = other.remember(KOREAN[0])
    _legacy_site(paths, agent, steered)
    assert steered.index_status().stale_scopes == (SCOPE,)
    assert other.found_ids("데이터베이스 백업")[0] == kept  # searchable throughout
    assert steered.reindex().scopes == 1
    assert _stored_tokenizer(paths, OTHER) == tokenizer_id()


def test_reindex_keeps_vectors_when_it_rewrites_entries(
    paths: HostPaths, agent: InProcessAgent, steered: Engine
) -> None:
    _legacy_site(paths, agent, steered)
    with raw_store(paths) as db:
        before = db.rows("SELECT rid, model, vector FROM record_vectors ORDER BY rid")
    steered.reindex()
    with raw_store(paths) as db:
        after = db.rows("SELECT rid, model, vector FROM record_vectors ORDER BY rid")
    assert before == after and len(after) == len(CJK) + len(ENGLISH)


def test_reindex_embeds_the_records_a_model_has_no_vector_of(
    paths: HostPaths, agent: InProcessAgent, steered: Engine
) -> None:
    for text in KOREAN:
        agent.remember(text)
    with raw_store(paths) as db:
        db.execute("UPDATE record_vectors SET model = 'a-model-no-longer-installed'")
    status = steered.index_status()
    assert status.unembedded == len(KOREAN) and not status.stale_scopes
    seen: list[ReindexProgress] = []
    report = steered.reindex(seen.append)
    assert (report.scopes, report.embedded) == (0, len(KOREAN))
    assert seen[-1] == ReindexProgress("semantic", len(KOREAN), len(KOREAN))
    cache = steered.deps.semantic
    assert cache is not None
    korean = cache.vector_id
    with raw_store(paths) as db:
        assert db.count("record_vectors", "model = ?", (korean,)) == len(KOREAN)
    assert steered.index_status().current


def test_a_legacy_scope_of_english_needs_only_its_tokenizer_named(
    paths: HostPaths, agent: InProcessAgent, steered: Engine
) -> None:
    ids = [agent.remember(text) for text in ENGLISH]
    assert make_legacy(paths, steered, SCOPE) == 0  # English tokens read the same under both tokenizers
    assert steered.index_status().stale_scopes == (SCOPE,)
    report = steered.reindex()
    assert (report.scopes, report.retokenized) == (1, 0)
    assert agent.found_ids("where is the database backed up")[0] == ids[0]
    assert verify_store(steered.deps, full=True).ok


def test_an_emptied_scope_takes_the_tokenizer_of_its_next_entry(
    paths: HostPaths, agent: InProcessAgent, steered: Engine
) -> None:
    agent.remember(KOREAN[0])
    make_legacy(paths, steered, SCOPE)
    with raw_store(paths) as db:  # as if every memory of the scope had been forgotten since
        db.execute(
            "UPDATE scopes SET doc_count = 0 WHERE tenant = ? AND workspace = ?", (SCOPE.tenant, SCOPE.workspace)
        )
    assert steered.index_status().stale_scopes == ()
    with raw_store(paths) as db:
        db.execute(
            "UPDATE scopes SET doc_count = 1 WHERE tenant = ? AND workspace = ?", (SCOPE.tenant, SCOPE.workspace)
        )
    steered.reindex()
    agent.remember(KOREAN[1])
    assert _stored_tokenizer(paths, SCOPE) == tokenizer_id()
