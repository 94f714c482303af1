"""Two models by script: Latin-alphabet texts go to the English model, every other text to the multilingual one.

The first tests are the routing rules alone; the rest run the installed pair on both stores.
"""

from __future__ import annotations

from typing import Any

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.engine.recall.semantic_models import (
    ALL,
    CROSS_SCRIPT_MIN_MEMORIES,
    LATIN,
    OTHER,
    Matrix,
    SemanticModel,
    cosine_formulas,
    in_latin_alphabet,
    model_for,
    models_for_query,
    paired,
    single,
)
from engram_memory.host.settings import HostPaths
from tests.engine.test_languages import KOREAN
from tests.support.inprocess import InProcessAgent
from tests.support.raw import raw_store


class _Named:
    """An embedder that is only a name: routing never calls a model."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.model_version = "0"
        self.dimension = 4

    def embed(self, texts: Any) -> Matrix:
        raise AssertionError("routing must not embed")

    embed_queries = embed


ENGLISH_MODEL, MULTILINGUAL_MODEL = _Named("english"), _Named("multilingual")
PAIR = paired(ENGLISH_MODEL, MULTILINGUAL_MODEL)


@pytest.mark.parametrize(
    "text",
    [
        "Deploys need two approvals.",
        "Zoë moved to Zürich; the café opens at 7:30.",
        "A 5 µm filter, ﬁne.",
        "\uff26\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48 letters are Latin too",  # fullwidth
        "Việt Nam uses the Latin alphabet",
        "2023-05-08 12:00 🎉 #42",
        "",
    ],
)
def test_text_with_no_letter_outside_the_latin_script_is_in_the_latin_alphabet(text: str) -> None:
    assert in_latin_alphabet(text)
    assert model_for(PAIR, text).texts == LATIN


@pytest.mark.parametrize(
    "text",
    [
        "운영팀은 데이터베이스를 백업한다.",
        "维运团队每天晚上备份数据库。",
        "開発チームはデプロイ手順を移しました。",
        "Мы перенесли базу данных.",
        "\u03a4\u03bf \u03c3\u03cd\u03c3\u03c4\u03b7\u03bc\u03b1",  # Greek: the system
        "Met 민수 at the office",  # one name in Hangul is enough: the English model cannot read it
        "우리는 PostgreSQL을 선택했다",
    ],
)
def test_a_letter_of_another_script_sends_the_text_to_the_multilingual_model(text: str) -> None:
    assert not in_latin_alphabet(text)
    assert model_for(PAIR, text).texts == OTHER


def test_a_latin_query_consults_the_multilingual_memories_too_and_no_query_the_english_model_s() -> None:
    english, multilingual = PAIR
    assert models_for_query(PAIR, "who backs up the database") == [english, multilingual]
    assert models_for_query(PAIR, "데이터베이스 백업") == [multilingual]


def test_one_model_reads_every_text_and_keeps_the_plain_model_id_of_older_stores() -> None:
    (alone,) = single(MULTILINGUAL_MODEL)
    assert alone.texts == ALL and alone.vector_id == "multilingual"
    for text in ("Deploys need two approvals.", "운영팀은 데이터베이스를 백업한다."):
        assert model_for((alone,), text) is alone
        assert models_for_query((alone,), text) == [alone]


def test_the_pair_writes_vector_ids_no_single_model_store_holds() -> None:
    assert [model.vector_id for model in PAIR] == ["english+latin", "multilingual+other"]
    assert {model.vector_id for model in PAIR}.isdisjoint({"english", "multilingual"})


def test_the_formula_names_each_model_its_texts_and_constants() -> None:
    assert cosine_formulas(PAIR) == [
        "0.5*cosine(english,latin,primary+0.7*context)",
        "1*cosine(multilingual,other,primary+0.2*context)",
        f"latin-query:+other[>={CROSS_SCRIPT_MIN_MEMORIES}],zscore",
    ]
    assert cosine_formulas(single(ENGLISH_MODEL)) == ["1*cosine(english,all,primary+0.2*context)"]


# -- the installed pair, end to end ---------------------------------------------------------------------------


def _models(engine: Engine) -> tuple[SemanticModel, ...]:
    cache = engine.deps.semantic
    assert cache is not None
    return cache.models


def _stored_models(paths: HostPaths) -> dict[str, str]:
    with raw_store(paths) as db:
        rows = db.rows("SELECT r.record_id, v.model FROM record_vectors AS v JOIN records AS r ON r.rid = v.rid")
    return {str(record_id): str(model) for record_id, model in rows}


def test_the_default_channel_is_the_pair(served: Engine) -> None:
    english, multilingual = _models(served)
    assert (english.texts, english.embedder.model_id) == (LATIN, "all-MiniLM-L6-v2-onnx-qint8")
    assert (multilingual.texts, multilingual.embedder.model_id) == (OTHER, "multilingual-e5-small-onnx-qint8")


def test_each_memory_is_embedded_once_by_the_model_of_its_script(
    agent: InProcessAgent, served: Engine, paths: HostPaths
) -> None:
    english, multilingual = _models(served)
    note = agent.remember("The operations team backs up the database every night.")
    korean = agent.remember(KOREAN[0])
    mixed = agent.remember("Met 민수 about the database backup.")
    # A Korean line of context would be noise in an English model's vector: the memory is e5's.
    with_context = agent.remember("The backup runs at night.", context="운영팀이 매일 밤 백업한다.")
    assert _stored_models(paths) == {
        note: english.vector_id,
        korean: multilingual.vector_id,
        mixed: multilingual.vector_id,
        with_context: multilingual.vector_id,
    }


# Korean notes on everyday work, enough of them for the multilingual model's memories to be consulted by an
# English query (CROSS_SCRIPT_MIN_MEMORIES).
_TEAMS = ["운영팀", "개발팀", "디자인팀", "영업팀", "재무팀", "인사팀"]
_TASKS = ["서버 로그를 점검", "주간 보고서를 작성", "고객 설문을 정리", "예산 계획을 검토", "채용 공고를 갱신"]
KOREAN_NOTES = [f"{team}은 매주 {task}한다." for team in _TEAMS for task in _TASKS]
CAT_FED = "고양이에게는 하루에 두 번 사료를 준다."  # the cat is fed twice a day


def _semantic_receipts(value: dict[str, Any]) -> list[dict[str, Any]]:
    return [channel for channel in value["rank_receipt"]["channels"] if channel["channel"] == "semantic"]


def test_an_english_query_finds_a_korean_memory_across_languages(agent: InProcessAgent) -> None:
    assert len(KOREAN_NOTES) + 1 >= CROSS_SCRIPT_MIN_MEMORIES
    agent.remember_many(KOREAN_NOTES)
    agent.remember("Quarterly invoices are mailed on the first Monday.")
    agent.remember("The greenhouse vents open at noon.")
    cat = agent.remember(CAT_FED)
    value = agent.search("how often do we feed the cat")
    assert [p["record"]["record_id"] for p in value["records"]][:1] == [cat]
    assert [(c["texts"], c["weight"], c["eligible"]) for c in _semantic_receipts(value)] == [
        (LATIN, 0.5, 2),
        (OTHER, 0.5, len(KOREAN_NOTES) + 1),
    ]


def test_a_few_memories_in_another_script_are_left_to_the_lexical_channel(agent: InProcessAgent) -> None:
    invoices = agent.remember("Quarterly invoices are mailed on the first Monday.")
    agent.remember(CAT_FED)
    value = agent.search("when are invoices sent")
    assert [p["record"]["record_id"] for p in value["records"]][:1] == [invoices]
    assert [c["texts"] for c in _semantic_receipts(value)] == [LATIN]  # one Korean memory: not consulted


def test_an_english_memory_that_answers_outranks_the_same_fact_in_another_script(agent: InProcessAgent) -> None:
    agent.remember_many([*KOREAN_NOTES, CAT_FED])
    agent.remember_many(
        [f"Release note {n}: the deploy train leaves on {day}." for n, day in enumerate(["Friday"] * 30)]
    )
    fed = agent.remember("We feed the cat twice a day, at seven and at six.")
    assert agent.found_ids("how often do we feed the cat")[:1] == [fed]


def test_a_query_in_another_script_never_consults_the_english_model(agent: InProcessAgent) -> None:
    agent.remember("The operations team backs up the database every night.")
    backup = agent.remember(KOREAN[0])
    value = agent.search("데이터베이스로 백업하는 팀은?")
    assert [p["record"]["record_id"] for p in value["records"]][:1] == [backup]
    semantic = [channel for channel in value["rank_receipt"]["channels"] if channel["channel"] == "semantic"]
    assert [(c["texts"], c["weight"]) for c in semantic] == [(OTHER, 1.0)]


def test_vectors_a_single_model_wrote_are_replaced_by_the_pair_s(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    english, multilingual = _models(steered)
    note = agent.remember("The operations team backs up the database every night.")
    korean = agent.remember(KOREAN[0])
    with raw_store(paths) as db:  # as a store of the one-model channel left them
        db.execute("UPDATE record_vectors SET model = 'multilingual-e5-small-onnx-qint8'")
    assert steered.index_status().unembedded == 2
    assert steered.reindex().embedded == 2
    assert _stored_models(paths) == {note: english.vector_id, korean: multilingual.vector_id}
    assert steered.index_status().current
