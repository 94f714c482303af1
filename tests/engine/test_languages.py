"""Search in the languages our users write: Korean with other particles, Traditional memories
found by Simplified queries, Japanese mixing kana and kanji, English unchanged. Both stores, both profiles.

Each case also shows that the first tokenizer (tests/support/legacy_index.py) could not make the match,
so these fail if the analysis falls back to it.
"""

from __future__ import annotations

import random

import pytest

from engram_memory.engine.recall.ranking import MAX_QUERY_TERMS, MAX_RANKED_TERMS
from engram_memory.engine.recall.text import query_terms, tokenize
from engram_memory.host.settings import HostPaths
from tests.support.inprocess import InProcessAgent
from tests.support.legacy_index import legacy_tokenize
from tests.support.raw import raw_store

KOREAN = [
    "운영팀은 데이터베이스를 매일 밤 클라우드에 백업한다.",
    "개발팀은 새 서버로 배포 절차를 옮겼다.",
    "주간 회의는 매주 월요일 오전 열 시에 열린다.",
    "고객 문의는 지원팀이 평일에 처리한다.",
    "데이터 분석 보고서는 매달 마지막 금요일에 나온다.",
    "보안 점검은 분기마다 외부 업체가 맡는다.",
]
TRADITIONAL = [
    "維運團隊每天晚上把資料庫備份到雲端儲存。",
    "開發團隊把部署流程搬到新的伺服器。",
    "每週一上午十點舉行團隊會議。",
    "客戶問題由支援團隊在工作日處理。",
    "資料分析報告在每個月最後一個星期五發布。",
    "安全檢查每季由外部廠商負責。",
]
JAPANESE = [
    "運用チームは毎晩データベースをクラウドにバックアップします。",
    "開発チームはデプロイ手順を新しいサーバーに移しました。",
    "東京の図書館で毎週日曜日に勉強会を開きます。",
    "顧客からの問い合わせはサポートチームが平日に対応します。",
    "分析レポートは毎月最後の金曜日に公開されます。",
    "セキュリティ点検は四半期ごとに外部の業者が担当します。",
]
ENGLISH = [
    "The operations team backs up the database to cloud storage every night.",
    "The development team moved the deployment procedure to the new servers.",
    "The weekly meeting is held on Monday at ten in the morning.",
]


def _remember_all(agent: InProcessAgent, texts: list[str]) -> list[str]:
    return [agent.remember(text) for text in texts]


def _first(agent: InProcessAgent, query: str) -> str:
    found = agent.found_ids(query)
    assert found, query
    return found[0]


@pytest.fixture(params=["hybrid", "lexical"])
def asking(request: pytest.FixtureRequest, agent: InProcessAgent, lexical_agent: InProcessAgent) -> InProcessAgent:
    """The agent whose engine ranks with the default (hybrid) profile, or lexically only; both share a home."""
    return agent if request.param == "hybrid" else lexical_agent


def test_korean_memory_is_found_when_query_uses_other_particles(agent: InProcessAgent, asking: InProcessAgent) -> None:
    ids = _remember_all(agent, KOREAN)
    query = "데이터베이스로 백업하는 팀은?"
    assert _first(asking, query) == ids[0]
    assert not set(legacy_tokenize(query)) & set(legacy_tokenize(KOREAN[0]))


def test_korean_memory_is_found_when_query_adds_an_ending(agent: InProcessAgent, asking: InProcessAgent) -> None:
    ids = _remember_all(agent, KOREAN)
    assert _first(asking, "보안 점검을 맡는 곳은 어디인가요") == ids[5]
    assert _first(asking, "고객 문의를 처리하는 팀") == ids[3]


def test_traditional_memory_is_found_when_query_is_simplified(agent: InProcessAgent, asking: InProcessAgent) -> None:
    ids = _remember_all(agent, TRADITIONAL)
    query = "资料库每天备份到哪里?"
    assert _first(asking, query) == ids[0]
    assert _first(asking, "安全检查由谁负责") == ids[5]
    assert "资料" in query_terms(query) and "资料" in tokenize(TRADITIONAL[0])


def test_simplified_memory_is_found_when_query_is_traditional(agent: InProcessAgent, asking: InProcessAgent) -> None:
    simplified = agent.remember("运维团队每天晚上把数据库备份到云端存储。")
    agent.remember("开发团队把部署流程搬到新的服务器。")
    assert _first(asking, "資料庫備份 雲端儲存") == simplified


def test_variants_that_fold_in_two_steps_meet_every_form(agent: InProcessAgent, asking: InProcessAgent) -> None:
    # OpenCC's t2s maps 薴 to 苧 and 苧 to 苎: folded once, a memory of 薴麻 and a query for 苧麻 never met.
    ramie = agent.remember("這塊布是薴做的。")
    agent.remember("這塊布是棉做的。")
    assert _first(asking, "苧") == ramie
    assert _first(asking, "苎") == ramie


def test_japanese_memory_is_found_when_query_mixes_kana_and_kanji(
    agent: InProcessAgent, asking: InProcessAgent
) -> None:
    ids = _remember_all(agent, JAPANESE)
    assert _first(asking, "勉強会はどこで開かれますか") == ids[2]
    assert _first(asking, "データベースのバックアップは?") == ids[0]
    assert _first(asking, "問い合わせに対応するチーム") == ids[3]


def test_one_han_character_query_finds_it_inside_a_longer_word(agent: InProcessAgent, asking: InProcessAgent) -> None:
    ids = _remember_all(agent, TRADITIONAL)
    assert _first(asking, "季") == ids[5]


def test_english_ranking_is_unchanged_when_cjk_memories_share_the_scope(
    agent: InProcessAgent, asking: InProcessAgent
) -> None:
    english = _remember_all(agent, ENGLISH)
    _remember_all(agent, KOREAN[:2] + TRADITIONAL[:2] + JAPANESE[:2])
    assert _first(asking, "where is the database backed up") == english[0]
    assert _first(asking, "when is the weekly meeting") == english[2]


def test_mixed_script_memory_is_found_by_either_language(agent: InProcessAgent, asking: InProcessAgent) -> None:
    mixed = agent.remember("PostgreSQL 복제는 매주 점검한다; the replica lag alert fires after 30 s.")
    _remember_all(agent, KOREAN)
    assert _first(asking, "복제 점검") == mixed
    assert _first(asking, "replica lag alert") == mixed


def test_pending_cjk_content_is_neither_indexed_nor_embedded(agent: InProcessAgent, paths: HostPaths) -> None:
    _remember_all(agent, KOREAN[1:])
    agent.capture(KOREAN[0])  # captured, never admitted
    with raw_store(paths) as db:
        assert (db.count("lexical_index"), db.count("record_vectors")) == (len(KOREAN) - 1, len(KOREAN) - 1)
    texts = [packet["record"]["components"][0]["text"] for packet in agent.search("데이터베이스 백업")["records"]]
    assert texts and KOREAN[0] not in texts


def _han_text(seed: int, length: int) -> str:
    """Han characters no other text of the seed shares by design: every bigram and character in the index."""
    rng = random.Random(seed)
    return "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(length))


def test_an_8_kib_query_with_thousands_of_indexed_terms_is_answered(
    agent: InProcessAgent, asking: InProcessAgent
) -> None:
    # Each memory holds some 1,300 distinct terms; the query below names 5,000, so every store would be
    # asked about far more terms than one statement can join, were the terms not bounded.
    texts = [_han_text(seed, 700) for seed in range(3)]
    ids = _remember_all(agent, texts)
    query = (texts[1] + texts[0] + texts[2]).encode()[:8192].decode(errors="ignore")
    assert len(query_terms(query)) > MAX_QUERY_TERMS
    value = asking.search(query)
    assert value["records"][0]["record"]["record_id"] == ids[1]
    lexical = next(c for c in value["rank_receipt"]["channels"] if c["channel"] == "lexical")
    assert lexical["query_terms"] == MAX_RANKED_TERMS


def test_an_8_kib_query_of_distinct_words_is_answered(agent: InProcessAgent, asking: InProcessAgent) -> None:
    rng = random.Random(7)
    vocabulary = ["".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(6)) for _ in range(1200)]
    texts = [" ".join(vocabulary[at : at + 400]) for at in range(0, 1200, 400)]
    ids = _remember_all(agent, texts)
    query = " ".join(vocabulary[400:]).encode()[:8192].decode(errors="ignore")
    found = asking.found_ids(query)
    # Every term is in one memory alone: the first 256 of the query, all in the second memory, rank.
    assert found[0] == ids[1]
