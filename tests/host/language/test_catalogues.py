"""The message catalogues are complete and current, and nothing a person reads bypasses them.

Completeness: every message the host's code, templates and command tree can show (extracted as `make
messages` does) has a translation, not marked fuzzy, in Korean, Simplified and Traditional Chinese and
Japanese, with the same placeholders. Bypassing: a template's visible text or a person-facing attribute
outside `{% trans %}` / `_()`, or a literal handed to a printing, failing or raising call of the host's
Python without `_()`, fails here by file and line.
"""

from __future__ import annotations

import ast
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from babel.messages.catalog import Catalog

from engram_memory.host.language.choice import Language
from tests.support.messages import (
    HOST,
    TEMPLATE_DIRS,
    TRANSLATED,
    all_catalogs,
    mo_bytes,
    mo_path,
    po_bytes,
    po_path,
    untranslated,
)

_PLACEHOLDER = re.compile(r"\{[a-z_0-9]*(?:![rsa])?(?::[^{}]*)?\}|%\([a-z_]+\)s|</?[a-z]+[^>]*>")
_WORD = re.compile(r"[A-Za-z]{2,}")


@pytest.fixture(scope="module")
def catalogs() -> dict[Language, Catalog]:
    return all_catalogs()


@pytest.mark.parametrize("language", TRANSLATED, ids=str)
def test_every_message_is_translated(catalogs: dict[Language, Catalog], language: Language) -> None:
    missing = [message.id for message in untranslated(catalogs[language])]
    assert not missing, f"{language}: {len(missing)} messages lack a translation (make messages), e.g. {missing[:5]}"


@pytest.mark.parametrize("language", TRANSLATED, ids=str)
def test_the_shipped_catalogues_are_the_current_ones(catalogs: dict[Language, Catalog], language: Language) -> None:
    catalog = catalogs[language]
    assert po_path(language).read_bytes() == po_bytes(catalog), f"{po_path(language)} is stale: run make messages"
    assert mo_path(language).read_bytes() == mo_bytes(catalog), f"{mo_path(language)} is stale: run make messages"


@pytest.mark.parametrize("language", TRANSLATED, ids=str)
def test_translations_keep_every_placeholder_and_tag(catalogs: dict[Language, Catalog], language: Language) -> None:
    broken = []
    for message in catalogs[language]:
        if not message.id:
            continue
        sources = message.id if isinstance(message.id, tuple) else (message.id,)
        forms = message.string if isinstance(message.string, tuple) else (message.string,)
        wanted = sorted(set(_PLACEHOLDER.findall(sources[-1])))
        broken += [message.id for form in forms if sorted(set(_PLACEHOLDER.findall(form))) != wanted]
    assert not broken, broken[:5]


def test_traditional_chinese_is_not_simplified_left_as_it_was(catalogs: dict[Language, Catalog]) -> None:
    simplified = {m.id: m.string for m in catalogs[Language.ZH_HANS] if m.id}
    changed = sum(1 for m in catalogs[Language.ZH_HANT] if m.id and m.string != simplified[m.id])
    assert changed > len(simplified) // 2


# -- templates ----------------------------------------------------------------------------------------

_JINJA = re.compile(r"\{#.*?#\}|\{%-?\s*trans\b.*?endtrans\s*-?%\}|\{\{.*?\}\}|\{%.*?%\}", re.S)
_PERSON_ATTRIBUTES = frozenset({"placeholder", "aria-label", "title", "alt"})
# Words that read the same in every language: the product's name, and an example a field shows.
_SAME_IN_EVERY_LANGUAGE = frozenset({"engram-memory", "bind_…"})


class _VisibleText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._quiet = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script", "code"):
            self._quiet += 1
        self.found += [value for name, value in attrs if name in _PERSON_ATTRIBUTES and value]

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script", "code"):
            self._quiet -= 1

    def handle_data(self, data: str) -> None:
        if not self._quiet:
            self.found.append(data)


def untranslated_template_text(source: str) -> list[str]:
    """What a template shows a person that no catalogue translates."""
    parser = _VisibleText()
    parser.feed(_JINJA.sub(" ", source))
    words = [word for text in parser.found for word in text.split() if word not in _SAME_IN_EVERY_LANGUAGE]
    return [word for word in words if _WORD.search(word)]


TEMPLATES = sorted(path for folder in TEMPLATE_DIRS for path in folder.glob("*.html"))


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda path: f"{path.parent.parent.name}/{path.name}")
def test_no_template_shows_untranslated_text(template: Path) -> None:
    assert untranslated_template_text(template.read_text(encoding="utf-8")) == []


def test_the_template_check_sees_text_and_attributes_left_in_english() -> None:
    assert untranslated_template_text('<p>{{ _("Fine") }}</p><p>Left behind</p>') == ["Left", "behind"]
    assert untranslated_template_text('<input placeholder="type here">') == ["type", "here"]
    assert untranslated_template_text("{% trans %}Translated words{% endtrans %}<code>state_code</code>") == []


# -- the host's Python ----------------------------------------------------------------------------------

_SHOWING = frozenset(
    {"say", "fail", "warn", "print", "rule", "add_column", "TextColumn", "status", "message_page", "_tell", "host",
     "agent", "server"}
)  # fmt: skip
_SECOND_ARGUMENT = frozenset({"note_cut_off", "after_decision"})
_NOT_FOR_PEOPLE = frozenset({"TypeError", "ValueError", "KeyError", "RuntimeError", "AssertionError", "OSError"})
# Modules whose words are not for a person at the host: OAuth's protocol errors go to client programs, and
# the serve logs are for log search (their lines are fixed English, decision 0035).
_EXEMPT = ("oauth/upstream.py", "oauth/service.py", "oauth/client_documents.py", "oauth/provider.py",
           "oauth/pending.py", "oauth/clients.py", "oauth/resource_server.py", "serve/logs.py",
           "serve/observability.py", "language/")  # fmt: skip


def _has_words(text: str) -> bool:
    """Words of a language, not codes: `records` is one; `request_admission`, `{task.description}`,
    `tools/list` and `engram-memory` are not."""
    text = re.sub(r"\{[^{}]*\}", " ", text)
    return any(re.fullmatch(r"[A-Za-z]{2,}", token) for token in re.findall(r"[A-Za-z][\w./:-]*", text))


def _literal_words(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _has_words(node.value)
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(part, ast.Constant) and _has_words(str(part.value)) for part in node.values)
    if isinstance(node, ast.IfExp):
        return _literal_words(node.body) or _literal_words(node.orelse)
    if isinstance(node, ast.BinOp):
        return _literal_words(node.left) or _literal_words(node.right)
    return False


def untranslated_calls(source: str) -> list[int]:
    """Lines where a literal with words reaches a person without passing through the catalogue."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name in _SHOWING:
            shown = node.args[:1] + [k.value for k in node.keywords if k.arg == "title"]
        elif name in _SECOND_ARGUMENT:
            shown = node.args[1:2]
        elif name and re.search(r"(Error|Refused)$", name) and name not in _NOT_FOR_PEOPLE | {"ContractError"}:
            shown = node.args[:1]
        else:
            continue
        lines += [node.lineno for argument in shown if _literal_words(argument)]
    return lines


def test_every_message_the_host_shows_goes_through_the_catalogue() -> None:
    found = {}
    for path in sorted(HOST.rglob("*.py")):
        relative = path.relative_to(HOST).as_posix()
        if relative.startswith(_EXEMPT):
            continue
        lines = untranslated_calls(path.read_text(encoding="utf-8"))
        if lines:
            found[relative] = lines
    assert not found, f"literals shown to people without _(): {found}"


def test_the_source_check_sees_a_literal_that_skips_the_catalogue() -> None:
    assert untranslated_calls('say("plain words")\nsay(_("fine words"))\n') == [1]
    assert untranslated_calls('fail(f"{x} went wrong")\nraise HomeError("no home here")\n') == [1, 2]
    assert untranslated_calls('note_cut_off(3, "records")\nraise ValueError("internal")\n') == [1]
    assert untranslated_calls('log.agent("request_admission")\nsay(f"  {url}")\n') == []
