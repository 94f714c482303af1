"""Which language a text is written in, by its letters (engine/recall/languages.py)."""

from __future__ import annotations

import pytest

from engram_memory.engine.recall.languages import language_of


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("Deploys need two approvals.", "en"),
        ("Zoë moved to Zürich; the café opens at 7:30.", "en"),
        ("운영팀은 데이터베이스를 백업한다.", "ko"),
        ("우리는 PostgreSQL을 선택했다", "ko"),
        ("테라폼 상태 파일은 어디에 저장해?", "ko"),
        ("维运团队每天晚上备份数据库。", "zh"),
        ("維運團隊每天晚上備份資料庫。", "zh-hant"),
        ("開発チームはデプロイ手順を移しました。", "ja"),
        ("Terraform の状態ファイル", "ja"),
        ("Мы перенесли базу данных.", "other"),
        ("2023-05-08 12:00 🎉 #42", "other"),
        ("", "other"),
    ],
)
def test_the_script_with_the_most_weight_names_the_language(text: str, language: str) -> None:
    assert language_of(text) == language


def test_a_korean_name_in_an_english_sentence_leaves_it_english() -> None:
    assert language_of("Met 민수 at the office to talk about the database backup plan") == "en"
    assert language_of("민수 met us") == "ko"  # two Hangul letters outweigh five Latin ones
