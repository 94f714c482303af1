"""The README in Korean and in Simplified Chinese keeps in step with the English one: the same sections at
the same levels, the same commands and snippets character for character, the same pictures and links to
the docs, each section's heading and prose in its own language."""

from __future__ import annotations

import re
from pathlib import Path

import opencc
import pytest

ROOT = Path(__file__).resolve().parents[1]
ENGLISH = ROOT / "README.md"
TRANSLATIONS = {"ko": ROOT / "README.ko.md", "zh-Hans": ROOT / "README.zh-Hans.md"}
SCRIPTS = {"ko": re.compile(r"[\uac00-\ud7a3]"), "zh-Hans": re.compile(r"[\u4e00-\u9fff]")}
_FENCED = re.compile(r"^```[a-z]*\n.*?^```", re.S | re.M)
_TO_SIMPLIFIED = opencc.OpenCC("t2s")


def _prose(text: str) -> str:
    return _FENCED.sub("", text)


def headings(text: str) -> list[tuple[int, str]]:
    return [(len(hashes), title) for hashes, title in re.findall(r"^(#{1,6}) (.+)$", _prose(text), re.M)]


def code_blocks(text: str) -> list[str]:
    return _FENCED.findall(text)


def pictures(text: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)


def doc_links(text: str) -> set[str]:
    return set(re.findall(r"\]\(((?:docs/|CHANGELOG)[^)]*)\)", _prose(text)))


def client_markers(text: str) -> list[str]:
    return re.findall(r"<!-- client: [a-z-]+ [a-z]+ -->", text)


@pytest.mark.parametrize("language", sorted(TRANSLATIONS))
def test_the_translation_has_the_same_sections_commands_and_pictures(language: str) -> None:
    english, translated = ENGLISH.read_text("utf-8"), TRANSLATIONS[language].read_text("utf-8")
    assert [level for level, _ in headings(translated)] == [level for level, _ in headings(english)]
    assert code_blocks(translated) == code_blocks(english), "a command or snippet differs: copy it from README.md"
    assert pictures(translated) == pictures(english)
    assert doc_links(translated) == doc_links(english)
    assert client_markers(translated) == client_markers(english)


@pytest.mark.parametrize("language", sorted(TRANSLATIONS))
def test_the_translation_is_written_in_its_language(language: str) -> None:
    translated = TRANSLATIONS[language].read_text("utf-8")
    script = SCRIPTS[language]
    untranslated = [
        title
        for level, title in headings(translated)
        if level > 1
        and not script.search(title)
        and title not in {"Claude Code", "Claude Desktop", "VS Code", "Cursor"}
    ]
    assert untranslated == []
    paragraphs = [p for p in _prose(translated).split("\n\n") if len(p) > 200 and not p.startswith("|")]
    assert paragraphs and all(script.search(p) for p in paragraphs)
    if language == "zh-Hans":
        prose = _prose(translated)
        assert _TO_SIMPLIFIED.convert(prose) == prose  # Simplified characters only


def test_each_readme_links_the_other_languages() -> None:
    assert "(README.ko.md)" in ENGLISH.read_text("utf-8") and "(README.zh-Hans.md)" in ENGLISH.read_text("utf-8")
    for path in TRANSLATIONS.values():
        text = path.read_text("utf-8")
        assert "(README.md)" in text


def test_the_checks_see_a_command_that_drifted() -> None:
    english = "# t\n\n## A\n\n```sh\nengram-memory init\n```\n"
    assert code_blocks(english.replace("init", "init --store x")) != code_blocks(english)
    assert [level for level, _ in headings(english)] == [1, 2]
