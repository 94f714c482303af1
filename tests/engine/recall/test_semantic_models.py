"""One model for every memory, its vectors taken from their language's centroid (decision 0025).

The first tests are the arithmetic alone, on a stand-in model; the rest run the installed model on both
stores: in a workspace of five memories, one per language, a question in each other language finds each.
"""

# ruff: noqa: RUF001 - the questions are written with their languages' own punctuation
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from engram_memory.engine.engine import Engine
from engram_memory.engine.recall.languages import LANGUAGES
from engram_memory.engine.recall.semantic_models import Centroids, Matrix, SemanticModel, cosine_formula
from engram_memory.host.settings import HostPaths
from tests.support.inprocess import InProcessAgent
from tests.support.raw import raw_store


class _Fixed:
    """A stand-in model whose vectors are given: one axis per text it knows."""

    model_id = "fixed"
    model_version = "0"
    dimension = 4

    def __init__(self, vectors: dict[str, Sequence[float]]) -> None:
        self._vectors = vectors

    def embed(self, texts: Sequence[str]) -> Matrix:
        return np.asarray([self._vectors[text] for text in texts], dtype=np.float32)

    embed_queries = embed


def _means(vector: Sequence[float]) -> dict[str, Matrix]:
    return {language: np.asarray(vector, dtype=np.float32) for language in LANGUAGES}


def test_the_language_mean_is_taken_away_and_the_vector_made_unit_again() -> None:
    centroids = Centroids(
        "t", {**_means([0, 0, 0, 0]), "ko": np.asarray([0.5, 0, 0, 0], dtype=np.float32)}, _means([0, 0, 0, 0])
    )
    korean = centroids.passage(np.asarray([0.8, 0.6, 0, 0], dtype=np.float32), "운영팀은 백업한다")
    english = centroids.passage(np.asarray([0.8, 0.6, 0, 0], dtype=np.float32), "The team backs up")
    assert np.allclose(korean, [0.3 / np.hypot(0.3, 0.6), 0.6 / np.hypot(0.3, 0.6), 0, 0])
    assert np.allclose(english, [0.8, 0.6, 0, 0])


def test_text_of_another_script_loses_the_mean_of_every_language() -> None:
    passages = {language: np.asarray([0, 0, 0, 0], dtype=np.float32) for language in LANGUAGES}
    passages["en"] = np.asarray([1.0, 0, 0, 0], dtype=np.float32)
    centroids = Centroids("t", passages, _means([0, 0, 0, 0]))
    cyrillic = centroids.passage(np.asarray([1.0, 1.0, 0, 0], dtype=np.float32), "Мы перенесли базу данных")
    assert np.allclose(cyrillic, np.asarray([0.8, 1.0, 0, 0]) / np.linalg.norm([0.8, 1.0]))


def test_centroids_need_every_language() -> None:
    with pytest.raises(ValueError, match="every language"):
        Centroids("t", {"en": np.zeros(4, dtype=np.float32)}, _means([0, 0, 0, 0]))


def test_each_text_of_a_memory_is_centred_on_its_own_language() -> None:
    """A Korean line of context beside an English statement loses the Korean mean, not the English one."""
    model = SemanticModel(
        _Fixed({"The backup runs at night.": [1, 0, 0, 0], "운영팀이 밤에 백업한다.": [0, 1, 0, 0]}),
        Centroids(
            "t", {**_means([0, 0, 0, 0]), "ko": np.asarray([0, 0.5, 0, 0], dtype=np.float32)}, _means([0, 0, 0, 0])
        ),
        context_weight=0.5,
    )
    vector = model.memory_vector(model.embedder.embed, "The backup runs at night.", ["운영팀이 밤에 백업한다."])
    assert np.allclose(vector, np.asarray([1, 0.5, 0, 0]) / np.linalg.norm([1, 0.5]))


def test_the_vector_id_and_the_formula_name_the_centroids() -> None:
    plain = SemanticModel(_Fixed({}))
    centred = SemanticModel(_Fixed({}), Centroids("c9", _means([0, 0, 0, 0]), _means([0, 0, 0, 0])))
    assert (plain.vector_id, centred.vector_id) == ("fixed", "fixed-c9")
    assert cosine_formula(plain) == "cosine(fixed,primary+0.2*context)"
    assert cosine_formula(centred) == "cosine(fixed,primary+0.2*context,centred=c9)"


# -- the installed model, end to end ---------------------------------------------------------------------------


def _model(engine: Engine) -> SemanticModel:
    cache = engine.deps.semantic
    assert cache is not None
    return cache.model


def test_the_default_model_reads_every_language_and_is_centred(served: Engine) -> None:
    model = _model(served)
    assert model.embedder.model_id == "multilingual-e5-small-onnx-qint8"
    assert model.centroids is not None and model.vector_id == f"multilingual-e5-small-onnx-qint8-{model.centroids.name}"


def test_every_memory_is_embedded_by_the_one_model(agent: InProcessAgent, served: Engine, paths: HostPaths) -> None:
    ids = [
        agent.remember("The operations team backs up the database every night."),
        agent.remember("운영팀은 데이터베이스를 매일 밤 백업한다."),
        agent.remember("Met 민수 about the database backup."),
        agent.remember("The backup runs at night.", context="운영팀이 매일 밤 백업한다."),
    ]
    served.deps.indexer.settle()  # type: ignore[union-attr]
    with raw_store(paths) as db:
        rows = db.rows("SELECT r.record_id, v.model FROM record_vectors AS v JOIN records AS r ON r.rid = v.rid")
    assert dict((str(record), str(model)) for record, model in rows) == dict.fromkeys(ids, _model(served).vector_id)


# Five facts of a team's life, each written once in one language; the questions ask for each in every other.
# Written for these tests (not taken from any evaluation set).
MEMORIES = {
    "en": "New services store their data in PostgreSQL; MySQL is no longer allowed.",
    "ko": "테라폼 상태 파일은 S3 버킷에 저장하고 잠금은 DynamoDB로 한다.",
    "zh": "每周五下午三点，团队一起复盘本周的线上故障。",
    "zh-hant": "新進員工的筆記型電腦由資訊部在到職第一天發放。",
    "ja": "本番環境へのデプロイは二人の承認が必要です。",
}
QUESTIONS = {
    "en": {
        "ko": "새 서비스는 어떤 데이터베이스를 써야 해?",
        "zh": "新服务应该用什么数据库？",
        "zh-hant": "新服務應該使用哪種資料庫？",
        "ja": "新しいサービスはどのデータベースを使うべき？",
    },
    "ko": {
        "en": "Where do we keep the Terraform state file?",
        "zh": "Terraform 状态文件存放在哪里？",
        "zh-hant": "Terraform 狀態檔案存放在哪裡？",
        "ja": "Terraform の状態ファイルはどこに保存していますか？",
    },
    "zh": {
        "en": "When does the team review the week's production incidents?",
        "ko": "팀은 언제 이번 주 장애를 회고하나요?",
        "zh-hant": "團隊什麼時候一起檢討本週的線上事故？",
        "ja": "チームはいつ今週の障害を振り返りますか？",
    },
    "zh-hant": {
        "en": "Who hands out laptops to new employees?",
        "ko": "신입 사원 노트북은 누가 나눠 주나요?",
        "zh": "新员工的笔记本电脑由谁发放？",
        "ja": "新入社員のノートパソコンは誰が配りますか？",
    },
    "ja": {
        "en": "How many approvals does a production deploy need?",
        "ko": "운영 환경 배포에는 승인이 몇 명 필요해?",
        "zh": "部署到生产环境需要几个人批准？",
        "zh-hant": "部署到正式環境需要幾個人核准？",
    },
}


def test_a_question_in_each_language_finds_the_memory_written_in_each_other(agent: InProcessAgent) -> None:
    """Each of the 20 questions finds its memory in the first two, and 19 of them first: in a workspace of
    five memories every word is rare, so one shared word ("new" in "Who hands out laptops to new
    employees?" and in the note on new services) weighs as much as the model's reading of the question."""
    ids = {language: agent.remember(text) for language, text in MEMORIES.items()}
    ranks = {
        (memory, asked): agent.found_ids(question).index(ids[memory])
        for memory, questions in QUESTIONS.items()
        for asked, question in questions.items()
    }
    assert max(ranks.values()) <= 1
    assert sum(rank == 0 for rank in ranks.values()) >= len(ranks) - 1
