"""SPEC §4 and §9: search (pages, cursors, budgets, receipts) and get (read receipts), in a workspace of their own."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any

import pytest

from engram_memory.host.settings import HostPaths
from tests.mcp.helpers import (
    ADMIT,
    CAPTURE,
    DIGEST_RE,
    Pool,
    admit,
    assert_failure,
    capture,
    found_ids,
    get,
    ok_value,
    remember,
    search,
    unique_word,
)
from tests.mcp.helpers import forget_now as _forget_now
from tests.support.agents import McpAgent, ServedAgent, ServedHome
from tests.support.homes import bind
from tests.support.payloads import VALID_FROM_MS, capture_args, unique_key, with_change

INSTANT_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
PAGE_RECORDS = 5
DAY_MS = 86_400_000


@dataclass(frozen=True)
class Corpus:
    topic: str
    record_ids: frozenset[str]


@pytest.fixture(scope="module")
def searcher(pool: Pool) -> McpAgent:
    return pool.agent("searcher")


@pytest.fixture(scope="module")
def corpus(searcher: McpAgent) -> Corpus:
    """Five accepted records in workspace-search that all match one topic word."""
    topic = unique_word("pagetopic")
    ids = set()
    for index in range(PAGE_RECORDS):
        _, record_id = remember(searcher, f"The {topic} note {unique_word()} number {index} for paging.")
        ids.add(record_id)
    return Corpus(topic=topic, record_ids=frozenset(ids))


def _page(agent: McpAgent, query: str, **params: Any) -> dict[str, Any]:
    return ok_value(search(agent, query, **params))


def _tamper(text: str, index: int) -> str:
    replacement = "A" if text[index] != "A" else "B"
    return text[:index] + replacement + text[index + 1 :]


# -- results --------------------------------------------------------------------------------------


def test_search_zero_matches_empty_records(searcher: McpAgent) -> None:
    value = _page(searcher, unique_word("absent"))
    assert value["records"] == []
    assert "next_page_cursor" not in value
    assert value["rank_receipt"]["candidate_count"] == 0
    assert DIGEST_RE.fullmatch(value["response_digest"])


def test_search_stop_words_only_empty_records(searcher: McpAgent) -> None:
    assert _page(searcher, "the and of")["records"] == []


def test_search_result_shape(searcher: McpAgent, corpus: Corpus) -> None:
    value = _page(searcher, corpus.topic, limit=2)
    assert set(value) == {"records", "rank_receipt", "next_page_cursor", "response_digest"}
    for packet in value["records"]:
        assert set(packet) == {"record", "redacted_fields", "redaction_receipt_digest", "score", "rank"}
        assert packet["record"]["record_id"] in corpus.record_ids
        assert packet["record"]["state"] == "accepted_current"
        assert packet["redacted_fields"] == []
        assert DIGEST_RE.fullmatch(packet["redaction_receipt_digest"])
        assert isinstance(packet["score"], int | float)


def test_search_default_limit_returns_all_five(searcher: McpAgent, corpus: Corpus) -> None:
    value = _page(searcher, corpus.topic)
    assert {packet["record"]["record_id"] for packet in value["records"]} == corpus.record_ids
    assert [packet["rank"] for packet in value["records"]] == [1, 2, 3, 4, 5]
    assert "next_page_cursor" not in value


def test_search_ranks_one_based_across_pages(searcher: McpAgent, corpus: Corpus) -> None:
    first = _page(searcher, corpus.topic, limit=2)
    second = _page(searcher, corpus.topic, limit=2, page_cursor=first["next_page_cursor"])
    third = _page(searcher, corpus.topic, limit=2, page_cursor=second["next_page_cursor"])
    assert [packet["rank"] for packet in first["records"]] == [1, 2]
    assert [packet["rank"] for packet in second["records"]] == [3, 4]
    assert [packet["rank"] for packet in third["records"]] == [5]
    assert "next_page_cursor" not in third
    ids = [packet["record"]["record_id"] for page in (first, second, third) for packet in page["records"]]
    assert len(ids) == len(set(ids)) == PAGE_RECORDS
    assert set(ids) == corpus.record_ids


def test_search_pages_follow_single_page_order(searcher: McpAgent, corpus: Corpus) -> None:
    whole = [packet["record"]["record_id"] for packet in _page(searcher, corpus.topic)["records"]]
    first = _page(searcher, corpus.topic, limit=3)
    second = _page(searcher, corpus.topic, limit=3, page_cursor=first["next_page_cursor"])
    paged = [packet["record"]["record_id"] for page in (first, second) for packet in page["records"]]
    assert paged == whole


def test_search_cursor_other_query_stale_page(searcher: McpAgent, corpus: Corpus) -> None:
    first = _page(searcher, corpus.topic, limit=2)
    envelope = search(searcher, corpus.topic + " paging", limit=2, page_cursor=first["next_page_cursor"])
    assert_failure(envelope, "STALE_PAGE")


def test_search_cursor_other_limit_stale_page(searcher: McpAgent, corpus: Corpus) -> None:
    first = _page(searcher, corpus.topic, limit=2)
    assert_failure(search(searcher, corpus.topic, limit=3, page_cursor=first["next_page_cursor"]), "STALE_PAGE")


def test_search_cursor_other_max_packet_bytes_stale_page(searcher: McpAgent, corpus: Corpus) -> None:
    first = _page(searcher, corpus.topic, limit=2)
    envelope = search(searcher, corpus.topic, limit=2, max_packet_bytes=100_000, page_cursor=first["next_page_cursor"])
    assert_failure(envelope, "STALE_PAGE")


def test_search_cursor_other_principal_stale_page(pool: Pool, searcher: McpAgent, corpus: Corpus) -> None:
    first = _page(searcher, corpus.topic, limit=2)
    envelope = search(pool.agent("alice"), corpus.topic, limit=2, page_cursor=first["next_page_cursor"])
    assert_failure(envelope, "STALE_PAGE")


@pytest.mark.parametrize("where", ["mac-first-char", "body-char", "truncated", "appended"])
def test_search_cursor_tampered_stale_page(searcher: McpAgent, corpus: Corpus, where: str) -> None:
    cursor = _page(searcher, corpus.topic, limit=2)["next_page_cursor"]
    mac_start = cursor.rindex(".") + 1
    tampered = {
        "mac-first-char": _tamper(cursor, mac_start),
        "body-char": _tamper(cursor, 8),
        "truncated": cursor[:-4],
        "appended": cursor + "AAAA",
    }[where]
    assert tampered != cursor
    assert_failure(search(searcher, corpus.topic, limit=2, page_cursor=tampered), "STALE_PAGE")


@pytest.mark.parametrize("cursor", ["garbage", "pc1.", "pc1.e30.AAAA", "pc1.!!!.???", "x" * 2048])
def test_search_cursor_garbage_stale_page(searcher: McpAgent, corpus: Corpus, cursor: str) -> None:
    assert_failure(search(searcher, corpus.topic, limit=2, page_cursor=cursor), "STALE_PAGE")


def test_search_cursor_after_new_admission_stale_page(searcher: McpAgent, corpus: Corpus) -> None:
    first = _page(searcher, corpus.topic, limit=2)
    remember(searcher, f"An unrelated {unique_word()} fact moves the scope.")
    assert_failure(search(searcher, corpus.topic, limit=2, page_cursor=first["next_page_cursor"]), "STALE_PAGE")
    # A fresh search without the cursor works again.
    fresh = _page(searcher, corpus.topic, limit=2)
    second = _page(searcher, corpus.topic, limit=2, page_cursor=fresh["next_page_cursor"])
    assert [packet["rank"] for packet in second["records"]] == [3, 4]


def test_search_semantic_required_ranking_unavailable(searcher: McpAgent, corpus: Corpus) -> None:
    envelope = search(searcher, corpus.topic, capability_policy={"minimum_channels": "lexical_and_semantic"})
    assert_failure(envelope, "RANKING_UNAVAILABLE")
    assert envelope["error"]["retriable"] is True


def test_search_network_allow_grants_nothing_extra(searcher: McpAgent, corpus: Corpus) -> None:
    plain = _page(searcher, corpus.topic)
    allowed = _page(searcher, corpus.topic, capability_policy={"minimum_channels": "lexical", "network": "allow"})
    assert [p["record"]["record_id"] for p in allowed["records"]] == [
        p["record"]["record_id"] for p in plain["records"]
    ]
    assert [channel["channel"] for channel in allowed["rank_receipt"]["channels"]] == ["lexical"]


# -- budgets --------------------------------------------------------------------------------------


def test_search_record_over_budget_projection_oversized(searcher: McpAgent) -> None:
    word = unique_word("hugerecord")
    _, record_id = remember(searcher, f"The {word} record is long. " + "padding words " * 400)
    assert_failure(search(searcher, word, max_packet_bytes=4096), "PROJECTION_OVERSIZED")
    assert found_ids(searcher, word) == [record_id]


def test_get_record_over_budget_projection_oversized(searcher: McpAgent) -> None:
    word = unique_word("hugeget")
    _, record_id = remember(searcher, f"The {word} record is long. " + "padding words " * 400)
    assert_failure(get(searcher, record_id, max_packet_bytes=4096), "PROJECTION_OVERSIZED")
    assert ok_value(get(searcher, record_id))["record"]["record_id"] == record_id


def test_search_packets_stop_before_budget_and_continue(searcher: McpAgent) -> None:
    word = unique_word("budgeted")
    ids = {remember(searcher, f"The {word} entry {unique_word()}. " + "filler text " * 100)[1] for _ in range(3)}
    first = _page(searcher, word, max_packet_bytes=4096)
    assert 1 <= len(first["records"]) < 3
    sizes = [len(json.dumps(p, ensure_ascii=False, separators=(",", ":")).encode()) for p in first["records"]]
    assert sum(sizes) <= 4096
    rest = _page(searcher, word, max_packet_bytes=4096, page_cursor=first["next_page_cursor"])
    assert rest["records"][0]["rank"] == len(first["records"]) + 1
    seen = [p["record"]["record_id"] for p in first["records"] + rest["records"]]
    if "next_page_cursor" in rest:
        last = _page(searcher, word, max_packet_bytes=4096, page_cursor=rest["next_page_cursor"])
        seen += [p["record"]["record_id"] for p in last["records"]]
    assert sorted(seen) == sorted(ids)


# -- receipts -------------------------------------------------------------------------------------


def test_rank_receipt_fields(searcher: McpAgent, corpus: Corpus) -> None:
    receipt = _page(searcher, corpus.topic)["rank_receipt"]
    for name in ("request_digest", "ordered_ids_digest"):
        assert DIGEST_RE.fullmatch(receipt[name]), name
    assert isinstance(receipt["profile"], str) and receipt["profile"]
    assert isinstance(receipt["formula_ref"], str) and receipt["formula_ref"]
    assert receipt["candidate_count"] == PAGE_RECORDS
    assert INSTANT_RE.fullmatch(receipt["valid_as_of"])
    assert INSTANT_RE.fullmatch(receipt["system_as_of"])
    assert isinstance(receipt["channels"], list) and receipt["channels"]


def test_rank_receipt_same_state_same_order_digest(searcher: McpAgent, corpus: Corpus) -> None:
    one = _page(searcher, corpus.topic)
    two = _page(searcher, corpus.topic)
    assert one["rank_receipt"]["ordered_ids_digest"] == two["rank_receipt"]["ordered_ids_digest"]
    assert one["rank_receipt"]["request_digest"] == two["rank_receipt"]["request_digest"]
    assert [p["record"]["record_id"] for p in one["records"]] == [p["record"]["record_id"] for p in two["records"]]


def test_rank_receipt_other_query_other_request_digest(searcher: McpAgent, corpus: Corpus) -> None:
    one = _page(searcher, corpus.topic)["rank_receipt"]
    two = _page(searcher, corpus.topic + " paging")["rank_receipt"]
    assert one["request_digest"] != two["request_digest"]


def test_get_read_receipt_fields(searcher: McpAgent) -> None:
    pending = capture(searcher, f"Read receipt {unique_word()} record.")
    record_id = admit(searcher, pending["candidate_id"])["outcome"]["record_id"]
    value = ok_value(get(searcher, record_id))
    assert set(value) == {"record", "redacted_fields", "redaction_receipt_digest", "read_receipt", "packet_digest"}
    receipt = value["read_receipt"]
    assert set(receipt) == {
        "record_id",
        "record_digest",
        "valid_as_of",
        "system_as_of",
        "validated_through_cursor",
        "authorization_receipt_digest",
        "revalidation_receipt_digest",
        "checked_at",
        "receipt_digest",
    }
    assert receipt["record_id"] == record_id
    assert receipt["record_digest"] == pending["record_digest"]
    for name in ("valid_as_of", "system_as_of", "checked_at"):
        assert INSTANT_RE.fullmatch(receipt[name]), name
    assert isinstance(receipt["validated_through_cursor"], int)
    assert receipt["validated_through_cursor"] >= pending["cursor"] + 1
    for name in ("authorization_receipt_digest", "revalidation_receipt_digest", "receipt_digest"):
        assert DIGEST_RE.fullmatch(receipt[name]), name
    assert DIGEST_RE.fullmatch(value["packet_digest"])
    assert DIGEST_RE.fullmatch(value["redaction_receipt_digest"])
    assert value["record"]["record_id"] == record_id


def test_get_unknown_record_not_found(searcher: McpAgent) -> None:
    assert_failure(get(searcher, "mem_" + "b" * 26), "NOT_FOUND")


def test_get_forgotten_record_not_found(pool: Pool, searcher: McpAgent) -> None:
    word = unique_word("forgotten")
    _, record_id = remember(searcher, f"The {word} fact will be forgotten.")
    assert ok_value(get(searcher, record_id))["record"]["record_id"] == record_id
    _forget_now(searcher, pool.paths, record_id)
    assert_failure(get(searcher, record_id), "NOT_FOUND")
    assert found_ids(searcher, word) == []


def test_forgotten_record_not_found_same_as_unknown(pool: Pool, searcher: McpAgent) -> None:
    _, record_id = remember(searcher, f"The {unique_word()} fact will be compared.")
    _forget_now(searcher, pool.paths, record_id)
    forgotten = get(searcher, record_id)
    unknown = get(searcher, "mem_" + "c" * (len(record_id) - 4))
    assert {k: v for k, v in forgotten.items() if k != "auditId"} == {
        k: v for k, v in unknown.items() if k != "auditId"
    }


def test_admission_of_forgotten_content_pending_adjudication(pool: Pool, searcher: McpAgent) -> None:
    text = f"The {unique_word('revenant')} fact was forgotten on purpose."
    _, record_id = remember(searcher, text)
    _forget_now(searcher, pool.paths, record_id)
    again = capture(searcher, text)
    outcome = admit(searcher, again["candidate_id"])["outcome"]
    assert outcome["status"] == "pending_adjudication"
    assert "record_id" not in outcome


def test_admission_replay_keeps_first_outcome_after_search(searcher: McpAgent) -> None:
    pending = capture(searcher, f"Replay {unique_word()} after search.")
    key = unique_key("admit")
    first = ok_value(searcher.call(ADMIT, {"candidate_id": pending["candidate_id"], "idempotency_key": key}))
    _page(searcher, "replay after search")
    again = ok_value(searcher.call(ADMIT, {"candidate_id": pending["candidate_id"], "idempotency_key": key}))
    assert again == {"outcome": first["outcome"], "replayed": True}


# -- valid time and expiry (SPEC §9 candidate universe: valid at the query's valid time, not expired) ----


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _admit_args(agent: McpAgent, arguments: dict[str, Any]) -> str:
    pending = ok_value(agent.call(CAPTURE, arguments))
    outcome = admit(agent, pending["candidate_id"])["outcome"]
    assert outcome["status"] == "accepted", outcome
    return str(outcome["record_id"])


def test_search_record_valid_from_future_not_returned(searcher: McpAgent) -> None:
    word = unique_word("future")
    _, _record_id = remember(searcher, f"The {word} rule applies from tomorrow.", valid_from_ms=_now_ms() + DAY_MS)
    assert found_ids(searcher, word) == []


def test_get_record_valid_from_future_not_found(searcher: McpAgent) -> None:
    _, record_id = remember(searcher, f"The {unique_word()} rule starts later.", valid_from_ms=_now_ms() + DAY_MS)
    assert_failure(get(searcher, record_id), "NOT_FOUND")


def test_search_record_valid_time_ended_not_returned(searcher: McpAgent) -> None:
    word = unique_word("ended")
    arguments = capture_args(f"The {word} rule applied for one minute in 2023.")
    arguments = with_change(arguments, "payload/valid_time/t_end", VALID_FROM_MS + 60_000)
    _admit_args(searcher, arguments)
    assert found_ids(searcher, word) == []


def test_get_record_valid_time_ended_not_found(searcher: McpAgent) -> None:
    arguments = capture_args(f"The {unique_word()} rule applied for one minute in 2023.")
    arguments = with_change(arguments, "payload/valid_time/t_end", VALID_FROM_MS + 60_000)
    record_id = _admit_args(searcher, arguments)
    assert_failure(get(searcher, record_id), "NOT_FOUND")


def test_search_record_valid_time_open_until_future_returned(searcher: McpAgent) -> None:
    word = unique_word("stillvalid")
    arguments = capture_args(f"The {word} rule applies until next year.")
    arguments = with_change(arguments, "payload/valid_time/t_end", _now_ms() + 365 * DAY_MS)
    record_id = _admit_args(searcher, arguments)
    assert found_ids(searcher, word) == [record_id]


@dataclass(frozen=True)
class Lapsed:
    word: str
    record_id: str
    capture_arguments: dict[str, Any]
    captured: dict[str, Any]


@pytest.fixture(scope="module")
def lapser(pool: Pool) -> McpAgent:
    return pool.agent("lapser")


@pytest.fixture(scope="module")
def lapsed(lapser: McpAgent) -> Lapsed:
    """A record admitted with expires_at two seconds ahead, seen while current, then left to lapse (in a
    scope of its own: see BINDINGS)."""
    word = unique_word("lapsing")
    expires_ms = _now_ms() + 2000
    seconds, millis = divmod(expires_ms, 1000)
    expires_at = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"
    arguments = capture_args(
        f"The {word} notice lapses soon.", retention={"derivative_rule": "make-ineligible", "expires_at": expires_at}
    )
    captured = ok_value(lapser.call(CAPTURE, arguments))
    record_id = admit(lapser, captured["candidate_id"])["outcome"]["record_id"]
    assert found_ids(lapser, word) == [record_id]
    time.sleep(max(0.0, (expires_ms - _now_ms()) / 1000) + 0.3)
    return Lapsed(word, record_id, arguments, captured)


def test_search_record_past_expires_at_not_returned(lapser: McpAgent, lapsed: Lapsed) -> None:
    assert found_ids(lapser, lapsed.word) == []


def test_get_record_past_expires_at_not_found(lapser: McpAgent, lapsed: Lapsed) -> None:
    assert_failure(get(lapser, lapsed.record_id), "NOT_FOUND")


def test_capture_replay_after_expires_at_passed_duplicate_exact(lapser: McpAgent, lapsed: Lapsed) -> None:
    again = ok_value(lapser.call(CAPTURE, lapsed.capture_arguments))
    assert again["status"] == "duplicate_exact"
    assert (again["candidate_id"], again["cursor"]) == (lapsed.captured["candidate_id"], lapsed.captured["cursor"])


def test_capture_replay_after_forget_duplicate_exact(pool: Pool, searcher: McpAgent) -> None:
    arguments = capture_args(f"The {unique_word('replayed')} fact is forgotten, then replayed.")
    first = ok_value(searcher.call(CAPTURE, arguments))
    record_id = admit(searcher, first["candidate_id"])["outcome"]["record_id"]
    _forget_now(searcher, pool.paths, record_id)
    again = ok_value(searcher.call(CAPTURE, arguments))
    assert (again["status"], again["candidate_id"], again["cursor"]) == (
        "duplicate_exact",
        first["candidate_id"],
        first["cursor"],
    )


# -- queries are words, never query syntax -----------------------------------------------------------


@pytest.fixture(scope="module")
def wordy(searcher: McpAgent) -> dict[str, str]:
    word = unique_word("syntax")
    text = f'The {word} rollout uses blue-green deploys; "quoted" a:b NEAR(x) and OR not * ^ deploying.'
    _, record_id = remember(searcher, text)
    return {"word": word, "record_id": record_id}


@pytest.mark.parametrize(
    "tail",
    ['"', '"unbalanced', "a:b", "blue-green", "NEAR(", "AND", "OR NOT", "*", "^", "(", ")", "-", "'", "{x}", "col:"],
)
def test_search_query_syntax_is_plain_text(searcher: McpAgent, wordy: dict[str, str], tail: str) -> None:
    assert found_ids(searcher, f"{wordy['word']} {tail}") == [wordy["record_id"]]


@pytest.mark.parametrize("query", ['"', "*", "NEAR(", ":", "()", "-", "OR", "^"])
def test_search_query_only_syntax_is_empty_success(searcher: McpAgent, query: str) -> None:
    assert isinstance(ok_value(search(searcher, query))["records"], list)


def test_search_case_folding_and_stemming(searcher: McpAgent, wordy: dict[str, str]) -> None:
    assert found_ids(searcher, wordy["word"].upper()) == [wordy["record_id"]]
    assert wordy["record_id"] in found_ids(searcher, "DEPLOY")
    assert wordy["record_id"] in found_ids(searcher, "deployed")


def test_search_cjk_text_found(searcher: McpAgent) -> None:
    marker = unique_word("cjk")
    _, record_id = remember(searcher, f"{marker} 数据库迁移必须先备份 and then verify.")
    assert record_id in found_ids(searcher, "数据库迁移")
    assert found_ids(searcher, f"{marker} 备份") == [record_id]


def test_search_next_page_pins_first_page_as_of(paths: HostPaths) -> None:
    # On a home and server of its own: nothing else writes to the scope between the two pages, so the
    # cursor is not stale.
    served = ServedHome(paths)
    with ServedAgent(served, bind(paths, workspace="workspace-search").token) as own:
        topic = unique_word("pagetopic")
        for index in range(PAGE_RECORDS):
            remember(own, f"The {topic} note {unique_word()} number {index} for paging.")
        first = _page(own, topic, limit=2)
        time.sleep(0.01)
        second = _page(own, topic, limit=2, page_cursor=first["next_page_cursor"])
    served.close()
    for name in ("valid_as_of", "system_as_of", "ordered_ids_digest", "request_digest", "candidate_count"):
        assert second["rank_receipt"][name] == first["rank_receipt"][name], name


def test_search_same_cursor_twice_same_page(searcher: McpAgent, corpus: Corpus) -> None:
    first = _page(searcher, corpus.topic, limit=2)
    one = _page(searcher, corpus.topic, limit=2, page_cursor=first["next_page_cursor"])
    two = _page(searcher, corpus.topic, limit=2, page_cursor=first["next_page_cursor"])
    assert [p["record"]["record_id"] for p in one["records"]] == [p["record"]["record_id"] for p in two["records"]]
    assert [p["rank"] for p in one["records"]] == [p["rank"] for p in two["records"]] == [3, 4]
