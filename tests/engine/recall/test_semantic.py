"""The semantic channel: embeddings follow acceptance, leave with forget, and fuse deterministically.

These run the installed embedding model (the `semantic` extra, which `make test` installs): a missing
model fails them rather than skipping them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.search_and_get import HYBRID_PROFILE_VERSION, PROFILE_VERSION
from engram_memory.engine.recall.semantic import VectorCache, embedding_texts, to_bytes
from engram_memory.engine.recall.text import tokenizer_id
from engram_memory.host.settings import HostPaths
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import capture_args, unique_key
from tests.support.raw import raw_store

SEARCH = "engram_memory_search"
PURPOSE = "purpose:tests"


def _approve(engine: Engine) -> None:
    engine.approve_confirmation(engine.confirmations()[0][0].confirmation_id, decided_by="host:test", ttl_ms=60_000)


def _forget(agent: InProcessAgent, steered: Engine, record_id: str) -> None:
    args = {"record_id": record_id, "idempotency_key": unique_key("f"), "reason_ref": "r"}
    assert agent.error_code("engram_memory_forget", args) == "gate_failed"
    _approve(steered)
    agent.value("engram_memory_forget", args)


def _vectors(paths: HostPaths) -> int:
    with raw_store(paths) as db:
        return db.count("record_vectors")


def _indexed(paths: HostPaths) -> int:
    with raw_store(paths) as db:
        return db.count("lexical_index")


def _search(agent: InProcessAgent, query: str, **options: Any) -> dict[str, Any]:
    return agent.value(SEARCH, {"query": query, "purpose_ref": PURPOSE, **options})


def test_the_model_is_installed_for_the_suite(steered: Engine, served: Engine) -> None:
    assert steered.deps.semantic is not None and served.deps.semantic is not None


def test_pending_content_is_never_embedded_nor_indexed(agent: InProcessAgent, paths: HostPaths) -> None:
    pending = agent.capture("The lighthouse keeper logs every passing ship.")
    assert (_vectors(paths), _indexed(paths)) == (0, 0)
    assert agent.found_ids("who records the vessels near the coast") == []
    assert agent.admit(pending["candidate_id"])["status"] == "accepted"
    assert (_vectors(paths), _indexed(paths)) == (1, 1)


def test_review_mode_keeps_the_candidate_unembedded(agent: InProcessAgent, paths: HostPaths) -> None:
    paths.policy.write_text(paths.policy.read_text(encoding="utf-8").replace('mode = "auto"', 'mode = "review"'))
    pending = agent.capture("The greenhouse vents open at noon.")
    assert agent.admit(pending["candidate_id"])["status"] == "pending_adjudication"
    assert _vectors(paths) == 0


def test_a_paraphrase_without_shared_words_is_found_only_by_the_semantic_channel(
    agent: InProcessAgent, lexical_agent: InProcessAgent
) -> None:
    car = agent.remember("The car needs new tyres before winter.")
    agent.remember("Quarterly invoices are mailed on the first Monday.")
    query = "automobile maintenance"
    assert lexical_agent.found_ids(query) == []
    assert agent.found_ids(query)[:1] == [car]


def test_forget_removes_the_vector_and_the_record_from_semantic_results(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    car = agent.remember("The car needs new tyres before winter.")
    other = agent.remember("Quarterly invoices are mailed on the first Monday.")
    assert agent.found_ids("automobile maintenance")[:1] == [car]  # the matrix cache is warm
    _forget(agent, steered, car)
    assert steered.deps.store.erase_physically(now=True)
    with raw_store(paths) as db:
        rows = db.rows("SELECT r.record_id FROM record_vectors AS v JOIN records AS r ON r.rid = v.rid")
    assert rows == [(other,)]
    assert car not in agent.found_ids("automobile maintenance")


def test_hybrid_receipt_names_the_profile_formula_model_and_generation(agent: InProcessAgent, served: Engine) -> None:
    agent.remember("Tracing spans carry the request id.")
    value = _search(agent, "tracing spans", capability_policy={"minimum_channels": "lexical_and_semantic"})
    receipt = value["rank_receipt"]
    cache = served.deps.semantic
    assert cache is not None and cache.model.centroids is not None
    embedder = cache.model.embedder
    assert receipt["profile"] == "hybrid-convex" and receipt["profile_version"] == HYBRID_PROFILE_VERSION
    cosine = f"0.6*cosine({embedder.model_id},primary+0.2*context,centred={cache.model.centroids.name})"
    assert receipt["formula_ref"].startswith(f"fuse({cosine};0.4*bm25f(")
    lexical, semantic = receipt["channels"]
    assert lexical["channel"] == "lexical" and semantic["channel"] == "semantic"
    assert lexical["tokenizer"] == tokenizer_id()
    assert semantic["model"] == embedder.model_id and semantic["model_version"] == embedder.model_version
    assert "generation" not in semantic and "generation" not in lexical  # the receipt's through_cursor pins both
    assert semantic["eligible"] == 1 and semantic["pooled"] == 1


def test_same_pinned_state_gives_the_same_order_and_digests(agent: InProcessAgent) -> None:
    for n in range(12):
        agent.remember(f"Deploy note {n}: the release train leaves on {['Monday', 'Tuesday', 'Friday'][n % 3]}.")
    first = _search(agent, "when does the release leave", limit=4)
    second = _search(agent, "when does the release leave", limit=4)
    assert [p["record"]["record_id"] for p in first["records"]] == [p["record"]["record_id"] for p in second["records"]]
    for key in ("ordered_ids_digest", "request_digest"):
        assert first["rank_receipt"][key] == second["rank_receipt"][key]
    assert first["response_digest"] == second["response_digest"]
    page_two = _search(agent, "when does the release leave", limit=4, page_cursor=first["next_page_cursor"])
    ranks = [p["rank"] for p in page_two["records"]]
    assert ranks == [5, 6, 7, 8]
    seen = {p["record"]["record_id"] for p in first["records"]}
    assert not seen & {p["record"]["record_id"] for p in page_two["records"]}


def test_a_write_moves_the_generation_and_a_new_record_is_found(agent: InProcessAgent) -> None:
    agent.remember("Quarterly invoices are mailed on the first Monday.")
    before = _search(agent, "automobile maintenance")["rank_receipt"]["through_cursor"]
    car = agent.remember("The car needs new tyres before winter.")
    after = _search(agent, "automobile maintenance")
    assert after["rank_receipt"]["through_cursor"] > before
    assert after["records"][0]["record"]["record_id"] == car


# -- vectors computed beside the admissions (engine/recall/indexer.py) ---------------------------------------


def _admit_without_waiting(agent: InProcessAgent, text: str) -> str:
    """Capture and admit through the raw tool calls: unlike agent.remember, nothing waits for the indexer."""
    candidate = agent.value("engram_memory_capture", capture_args(text))["candidate_id"]
    args = {"candidate_id": candidate, "idempotency_key": unique_key("admit")}
    outcome = agent.value("engram_memory_request_admission", args)["outcome"]
    assert outcome["status"] == "accepted"
    return str(outcome["record_id"])


def _vector_models(paths: HostPaths) -> list[tuple[str, str]]:
    with raw_store(paths) as db:
        rows = db.rows(
            "SELECT r.record_id, v.model FROM record_vectors AS v JOIN records AS r ON r.rid = v.rid"
            " ORDER BY r.record_id"
        )
    return [(str(row[0]), str(row[1])) for row in rows]


def test_a_search_right_after_an_admission_ranks_with_its_vector(agent: InProcessAgent) -> None:
    _admit_without_waiting(agent, "Quarterly invoices are mailed on the first Monday.")
    car = _admit_without_waiting(agent, "The car needs new tyres before winter.")
    assert agent.found_ids("automobile maintenance")[:1] == [car]


def test_vectors_lost_or_left_by_another_model_are_embedded_again_by_the_next_search(
    agent: InProcessAgent, served: Engine, paths: HostPaths
) -> None:
    car = agent.remember("The car needs new tyres before winter.")
    invoices = agent.remember("Quarterly invoices are mailed on the first Monday.")
    cache = served.deps.semantic
    assert cache is not None
    model = cache.vector_id
    with raw_store(paths) as db:  # a crash lost one vector; the other was written under a retired model
        db.execute("DELETE FROM record_vectors WHERE rid = (SELECT rid FROM records WHERE record_id = ?)", (car,))
        db.execute("UPDATE record_vectors SET model = 'retired-model'")
    garden = agent.remember("Prune the roses in early spring.")  # moves the generation: the matrix is rebuilt
    assert agent.found_ids("automobile maintenance")[:1] == [car]
    assert agent.found_ids("gardening chores")[:1] == [garden]
    served.deps.indexer.settle()  # type: ignore[union-attr]
    assert _vector_models(paths) == sorted((record, model) for record in (car, invoices, garden))


def test_a_record_whose_body_does_not_open_stays_out_of_the_semantic_channel_not_the_search(
    agent: InProcessAgent, paths: HostPaths
) -> None:
    broken = agent.remember("Quarterly invoices are mailed on the first Monday.")
    car = agent.remember("The car needs new tyres before winter.")
    with raw_store(paths) as db:  # the vector was lost and the body damaged: nothing to embed it from
        db.execute("DELETE FROM record_vectors WHERE rid = (SELECT rid FROM records WHERE record_id = ?)", (broken,))
        db.execute("DELETE FROM sealed_bodies WHERE owner_id = ?", (broken,))
    agent.remember("Prune the roses in early spring.")  # a new generation: the matrix is rebuilt
    assert agent.found_ids("automobile maintenance")[:1] == [car]
    assert broken not in agent.found_ids("automobile maintenance")


def test_a_vector_is_only_written_for_a_record_that_is_still_current(
    agent: InProcessAgent, served: Engine, steered: Engine, paths: HostPaths
) -> None:
    car = agent.remember("The car needs new tyres before winter.")
    _forget(agent, steered, car)
    assert _vector_models(paths) == []
    indexer, scope = served.deps.indexer, Scope(agent.binding.tenant, agent.binding.workspace)
    assert indexer is not None
    payload = {"primary_component_id": "main", "components": [{"component_id": "main", "text": "late job"}]}
    indexer.schedule(scope, car, payload)  # a job queued before the forget, landing after it
    indexer.schedule(scope, "mem_doesnotexistdoesnotexist00", payload)  # an admission rolled back
    indexer.settle()
    assert _vector_models(paths) == []


def test_the_stored_vector_is_the_one_the_model_gives_for_the_memory_alone(
    agent: InProcessAgent, served: Engine, paths: HostPaths
) -> None:
    """Each record is embedded on its own, so its vector never depends on what was queued with it."""
    agent.remember("The greenhouse vents open at noon.", context="Notes from the spring inspection.")
    first = agent.remember("The car needs new tyres before winter.", context="The greenhouse vents open at noon.")
    cache = served.deps.semantic
    assert cache is not None
    payload = capture_args("The car needs new tyres before winter.", context="The greenhouse vents open at noon.")
    fresh = VectorCache(cache.model)  # empty line cache: every text goes through the model
    scope = Scope(agent.binding.tenant, agent.binding.workspace)
    primary, lines = embedding_texts(payload["payload"])
    expected = to_bytes(fresh.model.memory_vector(lambda texts: fresh.embed_texts(scope, texts), primary, lines))
    with raw_store(paths) as db:
        stored = db.value(
            "SELECT vector FROM record_vectors WHERE rid = (SELECT rid FROM records WHERE record_id = ?)", (first,)
        )
    assert bytes(stored) == expected


# -- dates named in the query (engine/recall/timeref.py) ------------------------------------------------------


def _utc_ms(year: int, month: int, day: int, hour: int = 12) -> int:
    return int(datetime(year, month, day, hour, tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize("profile", ["hybrid", "lexical"])
def test_a_date_in_the_query_favours_the_memories_of_that_day(
    profile: str, agent: InProcessAgent, lexical_agent: InProcessAgent
) -> None:
    asking = agent if profile == "hybrid" else lexical_agent
    march = agent.remember("Team lunch at the harbour cafe.", valid_from_ms=_utc_ms(2023, 3, 2))
    may = agent.remember("Team lunch at the harbour cafe again.", valid_from_ms=_utc_ms(2023, 5, 9))
    assert set(asking.found_ids("team lunch at the harbour")[:2]) == {may, march}
    assert asking.found_ids("team lunch at the harbour on 2 March, 2023")[:1] == [march]
    assert asking.found_ids("team lunch at the harbour in March 2023")[:1] == [march]
    assert asking.found_ids("team lunch at the harbour on May 9, 2023")[:1] == [may]
    receipt = asking.search("team lunch on 2023-03-02")["rank_receipt"]
    version = HYBRID_PROFILE_VERSION if profile == "hybrid" else PROFILE_VERSION
    assert "date(1+1)" in receipt["formula_ref"] and receipt["profile_version"] == version


def test_an_agent_s_admission_commits_the_vector_with_the_record(
    agent: InProcessAgent, served: Engine, paths: HostPaths
) -> None:
    """Embedded before the admission's transaction, so no other process's search has to embed it."""
    indexer = served.deps.indexer
    assert indexer is not None
    car = _admit_without_waiting(agent, "The car needs new tyres before winter.")
    assert indexer.depth == 0  # nothing was queued
    assert [record for record, _ in _vector_models(paths)] == [car]


def test_a_host_import_s_records_get_their_vectors_from_the_indexer(
    agent: InProcessAgent, served: Engine, paths: HostPaths
) -> None:
    ids = agent.remember_many(["The car needs new tyres before winter.", "Prune the roses in early spring."])
    served.deps.indexer.settle()  # type: ignore[union-attr]
    assert sorted(record for record, _ in _vector_models(paths)) == sorted(ids)


def test_an_engine_with_the_channel_keeps_numpy_s_blas_on_one_thread(served: Engine) -> None:
    """Spinning BLAS workers took the core a search's lexical half ran on (semantic.sequential_blas)."""
    from threadpoolctl import threadpool_info

    numpy_blas = [pool for pool in threadpool_info() if pool["user_api"] == "blas" and "numpy" in pool["filepath"]]
    assert numpy_blas and all(pool["num_threads"] == 1 for pool in numpy_blas)
