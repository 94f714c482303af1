"""Search and get: ranking, receipts, pages pinned to a state, packet budgets, and the empty answer."""

from __future__ import annotations

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent


def test_zero_matches_is_an_empty_success(agent: InProcessAgent) -> None:
    value = agent.search("nothing stored yet about turbines")
    assert value["records"] == [] and "next_page_cursor" not in value
    assert value["rank_receipt"]["candidate_count"] == 0


def test_query_of_only_stop_words_still_answers(agent: InProcessAgent) -> None:
    record_id = agent.remember("It is what it is.")
    assert agent.found_ids("what is it") == [record_id]


def test_primary_text_outranks_context_text_lexically(lexical_agent: InProcessAgent) -> None:
    agent = lexical_agent
    in_context = agent.remember("Weekly planning happens on Mondays.", context="Mentions the zeppelin hangar once.")
    in_primary = agent.remember("The zeppelin hangar closes at dusk.", context="Weekly planning happens on Mondays.")
    assert agent.found_ids("zeppelin hangar") == [in_primary, in_context]


def test_stemming_and_case_folding_match_word_forms(agent: InProcessAgent) -> None:
    record_id = agent.remember("Connections to the REPLICA are pooled.")
    assert agent.found_ids("connecting replicas pooling") == [record_id]


def test_punctuation_in_queries_is_harmless(agent: InProcessAgent) -> None:
    record_id = agent.remember("Blue-green deploys switch the router.")
    for query in ["blue-green", 'a:b "quoted" blue', "router)", "NOT AND OR", "*", "NEAR(blue green)"]:
        value = agent.search(query)
        assert isinstance(value["records"], list)
    assert agent.found_ids("blue-green") == [record_id]


def test_search_is_deterministic_on_a_pinned_state(agent: InProcessAgent) -> None:
    for index in range(6):
        agent.remember(f"Cache entry {index} expires after the cache window.")
    first = agent.search("cache window expires")
    second = agent.search("cache window expires")
    assert first["rank_receipt"]["ordered_ids_digest"] == second["rank_receipt"]["ordered_ids_digest"]
    assert [p["record"]["record_id"] for p in first["records"]] == [p["record"]["record_id"] for p in second["records"]]


def test_pages_continue_ranks_and_never_repeat(agent: InProcessAgent) -> None:
    ids = {agent.remember(f"Shard {index} of the ledger replicates nightly.") for index in range(5)}
    page = agent.search("ledger shard replicates", limit=2)
    seen = [p["record"]["record_id"] for p in page["records"]]
    ranks = [p["rank"] for p in page["records"]]
    while "next_page_cursor" in page:
        page = agent.search("ledger shard replicates", limit=2, page_cursor=page["next_page_cursor"])
        seen += [p["record"]["record_id"] for p in page["records"]]
        ranks += [p["rank"] for p in page["records"]]
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    assert ranks == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    "change",
    [{"query": "ledger shard"}, {"limit": 3}, {"max_packet_bytes": 8192}, {"capability_policy": {"network": "allow"}}],
)
def test_cursor_with_other_parameters_is_stale(agent: InProcessAgent, change: dict[str, object]) -> None:
    for index in range(3):
        agent.remember(f"Shard {index} of the ledger replicates nightly.")
    first = agent.search("ledger shard replicates", limit=2)
    options = {"query": "ledger shard replicates", "limit": 2, **change}
    query = str(options.pop("query"))
    envelope = agent.call(
        "engram_memory_search",
        {"query": query, "purpose_ref": "purpose:tests", "page_cursor": first["next_page_cursor"], **options},
    )
    assert envelope["error"]["code"] == "STALE_PAGE"


def test_cursor_after_the_state_moved_is_stale(agent: InProcessAgent) -> None:
    for index in range(3):
        agent.remember(f"Queue {index} drains before shutdown.")
    first = agent.search("queue drains", limit=2)
    agent.capture("A pending capture does not move the searchable state.")
    assert agent.search("queue drains", limit=2, page_cursor=first["next_page_cursor"])["records"]
    agent.remember("Queue 9 drains before shutdown too.")
    envelope = agent.call(
        "engram_memory_search",
        {"query": "queue drains", "purpose_ref": "purpose:tests", "limit": 2, "page_cursor": first["next_page_cursor"]},
    )
    assert envelope["error"]["code"] == "STALE_PAGE"


@pytest.mark.parametrize(
    "mangle", [lambda c: c[:-2] + ("A" if c[-2] != "A" else "B") + c[-1], lambda c: "pc2.x.y", lambda c: c + "x"]
)
def test_tampered_cursor_is_stale(agent: InProcessAgent, mangle: object) -> None:
    for index in range(3):
        agent.remember(f"Lease {index} renews hourly.")
    cursor = agent.search("lease renews", limit=1)["next_page_cursor"]
    assert callable(mangle)
    envelope = agent.call(
        "engram_memory_search",
        {"query": "lease renews", "purpose_ref": "purpose:tests", "limit": 1, "page_cursor": mangle(cursor)},
    )
    assert envelope["error"]["code"] == "STALE_PAGE"


def test_cursor_from_another_principal_is_stale(
    served: Engine,
    paths: HostPaths,
) -> None:
    alice = InProcessAgent(served, bind(paths).binding)
    bob = InProcessAgent(served, bind(paths, principal="bob").binding)
    for index in range(3):
        alice.remember(f"Runner {index} caches wheels.")
    cursor = alice.search("runner caches", limit=1)["next_page_cursor"]
    envelope = bob.call(
        "engram_memory_search",
        {"query": "runner caches", "purpose_ref": "purpose:tests", "limit": 1, "page_cursor": cursor},
    )
    assert envelope["error"]["code"] == "STALE_PAGE"


def test_packets_stop_before_the_budget_and_continue_on_the_next_page(agent: InProcessAgent) -> None:
    filler = " ".join(["detail"] * 500)
    for index in range(4):
        agent.remember(f"Budget case {index}: {filler}")
    page = agent.search("budget case detail", limit=4, max_packet_bytes=8192)
    assert 1 <= len(page["records"]) < 4
    assert "next_page_cursor" in page
    following = agent.search("budget case detail", limit=4, max_packet_bytes=8192, page_cursor=page["next_page_cursor"])
    assert following["records"][0]["rank"] == len(page["records"]) + 1


def test_single_record_over_the_budget_is_projection_oversized(agent: InProcessAgent) -> None:
    record_id = agent.remember("Oversized " + "word " * 1500)
    envelope = agent.call(
        "engram_memory_search", {"query": "oversized", "purpose_ref": "purpose:tests", "max_packet_bytes": 4096}
    )
    assert envelope["error"]["code"] == "PROJECTION_OVERSIZED"
    got = agent.call(
        "engram_memory_get", {"record_id": record_id, "purpose_ref": "purpose:tests", "max_packet_bytes": 4096}
    )
    assert got["error"]["code"] == "PROJECTION_OVERSIZED"


def test_semantic_channel_required_without_a_model_is_ranking_unavailable(lexical_agent: InProcessAgent) -> None:
    agent = lexical_agent
    agent.remember("Anything at all.")
    envelope = agent.call(
        "engram_memory_search",
        {
            "query": "anything",
            "purpose_ref": "purpose:tests",
            "capability_policy": {"minimum_channels": "lexical_and_semantic"},
        },
    )
    assert envelope["error"] == {
        "code": "RANKING_UNAVAILABLE",
        "message": envelope["error"]["message"],
        "retriable": True,
    }


def test_lexical_rank_receipt_names_what_produced_the_order(lexical_agent: InProcessAgent) -> None:
    agent = lexical_agent
    agent.remember("Tracing spans carry the request id.")
    receipt = agent.search("tracing spans")["rank_receipt"]
    assert receipt["profile"] == "lexical-bm25f" and "bm25f(k1=1.2,b=0.75" in receipt["formula_ref"]
    assert receipt["candidate_count"] == 1 and receipt["channels"][0]["channel"] == "lexical"
    assert set(receipt) == {
        "request_digest",
        "profile",
        "profile_version",
        "formula_ref",
        "valid_as_of",
        "system_as_of",
        "through_cursor",
        "candidate_count",
        "ordered_ids_digest",
        "channels",
    }


def test_recent_knowledge_ranks_first_among_equals(served: Engine, paths: HostPaths, clock: ManualClock) -> None:
    agent = InProcessAgent(served, bind(paths).binding)
    old = agent.remember("The status page lives at status.example.", valid_from_ms=clock.now - 200 * 86_400_000)
    new = agent.remember("The status page lives at status.example now.", valid_from_ms=clock.now - 86_400_000)
    assert agent.found_ids("status page lives") == [new, old]
