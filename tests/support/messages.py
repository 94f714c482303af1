"""The host's message catalogues: what needs translating, and the `.po`/`.mo` files that translate it.

`make messages` runs `python -m tests.support.messages update`: it extracts every message (the `_`,
`N_` and `ngettext` calls of the host's Python, the console's and sign-in pages' templates, the engine's
host operations and refusals, and every help text of the command tree), merges them into each
language's `.po` file (new ones untranslated, gone ones dropped) and compiles the `.mo` files the package
ships. Traditional Chinese is not written by hand: OpenCC converts the Simplified catalogue (Taiwan
phrasing). tests/host/test_message_catalogues.py fails while any of this is stale or incomplete.

`todo LANG` prints the untranslated messages as JSON; `fill LANG FILE` takes a JSON object of
message -> translation (for a plural, a list of its forms) and writes it into LANG's catalogue.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import opencc
import typer.main
from babel.messages.catalog import Catalog, Message
from babel.messages.extract import extract_from_file
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po
from jinja2.ext import babel_extract

from engram_memory.engine.lifecycle import host_operations
from engram_memory.engine.refusals import Refusal
from engram_memory.host.cli.app import app
from engram_memory.host.cli.speaking import help_texts
from engram_memory.host.language.catalogue import DOMAIN, LOCALE_DIR
from engram_memory.host.language.choice import Language

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "src" / "engram_memory" / "host"
KEYWORDS = {"_": None, "N_": None, "gettext": None, "ngettext": (1, 2)}
TEMPLATE_DIRS = (HOST / "console" / "templates", HOST / "oauth" / "templates")
TRANSLATED = (Language.KO, Language.ZH_HANS, Language.ZH_HANT, Language.JA)
DERIVED = {Language.ZH_HANT: (Language.ZH_HANS, "s2twp")}
_FIXED_DATE = datetime(2026, 1, 1, tzinfo=UTC)


def _python_messages() -> Iterator[tuple[str | tuple[str, str], str]]:
    for path in sorted(HOST.rglob("*.py")):
        for _lineno, message, _comments, _context in extract_from_file("python", str(path), keywords=KEYWORDS):
            yield message, str(path.relative_to(ROOT))


def _template_messages() -> Iterator[tuple[str | tuple[str, str], str]]:
    for folder in TEMPLATE_DIRS:
        for path in sorted(folder.glob("*.html")):
            found = extract_from_file(babel_extract, str(path), keywords=KEYWORDS, options={"trimmed": "true"})
            for _lineno, message, _comments, _context in found:
                yield message, str(path.relative_to(ROOT))


def _engine_messages() -> Iterator[tuple[str, str]]:
    """What the engine declares for people in English: its host operations and its refusals."""
    for operation in host_operations.HOST_OPERATIONS.values():
        where = f"host operation {operation.name}"
        yield from ((text, where) for text in (operation.label, operation.help, operation.explains))
        for argument in operation.arguments:
            yield from ((text, where) for text in (argument.label, argument.help))
            yield from ((choice.label, where) for choice in argument.choices.values())
    for refusal in Refusal:
        yield refusal.value, f"refusal {refusal.name}"


def _help_messages() -> Iterator[tuple[str, str]]:
    for text in help_texts(typer.main.get_command(app)):
        yield text, "engram-memory --help"


def template() -> Catalog:
    """Every message the host shows a person, in English."""
    catalog = Catalog(domain=DOMAIN, project="engram-memory", creation_date=_FIXED_DATE, fuzzy=False)
    sources: Iterable[tuple[str | tuple[str, str], str]] = (
        *_python_messages(),
        *_template_messages(),
        *_engine_messages(),
        *_help_messages(),
    )
    for found, where in sources:
        message: str | tuple[str, ...] = found
        if isinstance(found, tuple):
            parts = tuple(part for part in found if part)
            message = parts[0] if len(parts) == 1 else parts
        if not message:
            continue
        known = catalog.get(message if isinstance(message, str) else message[0])
        if known is not None:
            known.locations.append((where, None))
            continue
        catalog.add(message, locations=[(where, None)])
    return catalog


def po_path(language: Language) -> Path:
    return LOCALE_DIR / language.directory / "LC_MESSAGES" / f"{DOMAIN}.po"


def mo_path(language: Language) -> Path:
    return po_path(language).with_suffix(".mo")


def read_catalog(language: Language) -> Catalog:
    path = po_path(language)
    if not path.exists():
        return Catalog(locale=language.directory, domain=DOMAIN, creation_date=_FIXED_DATE, fuzzy=False)
    with path.open("rb") as handle:
        return read_po(handle, locale=language.directory, domain=DOMAIN)


def po_bytes(catalog: Catalog) -> bytes:
    buffer = io.BytesIO()
    # Files without line numbers: a catalogue changes when a message does, not when code moves.
    write_po(
        buffer, catalog, width=116, omit_header=False, sort_output=True, ignore_obsolete=True, include_lineno=False
    )
    return buffer.getvalue()


def mo_bytes(catalog: Catalog) -> bytes:
    buffer = io.BytesIO()
    write_mo(buffer, catalog, use_fuzzy=False)
    return buffer.getvalue()


def derived(language: Language, source: Catalog) -> Catalog:
    """A catalogue converted from another by OpenCC (Traditional Chinese from Simplified)."""
    _, config = DERIVED[language]
    converter = opencc.OpenCC(config)
    catalog = Catalog(locale=language.directory, domain=DOMAIN, creation_date=_FIXED_DATE, fuzzy=False)
    for message in source:
        if not message.id:
            continue
        string = message.string
        if isinstance(string, tuple):
            converted: str | tuple[str, ...] = tuple(converter.convert(form) for form in string)
        else:
            converted = converter.convert(string) if string else ""
        catalog[message.id] = Message(message.id, converted, locations=message.locations, flags=message.flags)
    return catalog


def merged(language: Language, catalogs: dict[Language, Catalog], english: Catalog) -> Catalog:
    if language in DERIVED:
        return derived(language, catalogs[DERIVED[language][0]])
    catalog = read_catalog(language)
    catalog.update(english, no_fuzzy_matching=True, update_header_comment=False)
    catalog.obsolete.clear()
    catalog.creation_date = _FIXED_DATE
    catalog.revision_date = _FIXED_DATE
    catalog.fuzzy = False
    return catalog


def all_catalogs() -> dict[Language, Catalog]:
    english = template()
    catalogs: dict[Language, Catalog] = {}
    for language in TRANSLATED:
        catalogs[language] = merged(language, catalogs, english)
    return catalogs


def update() -> None:
    for language, catalog in all_catalogs().items():
        po_path(language).parent.mkdir(parents=True, exist_ok=True)
        po_path(language).write_bytes(po_bytes(catalog))
        mo_path(language).write_bytes(mo_bytes(catalog))


def untranslated(catalog: Catalog) -> list[Message]:
    missing = []
    for message in catalog:
        if not message.id:
            continue
        forms = message.string if isinstance(message.string, tuple) else (message.string,)
        if message.fuzzy or not all(forms):
            missing.append(message)
    return missing


def _todo(language: Language) -> None:
    catalog = all_catalogs()[language]
    todo = {
        (m.id if isinstance(m.id, str) else json.dumps(list(m.id), ensure_ascii=False)): ""
        for m in untranslated(catalog)
    }
    sys.stdout.write(json.dumps(todo, ensure_ascii=False, indent=1) + "\n")


def _fill(language: Language, path: Path) -> None:
    given: dict[str, str | list[str]] = json.loads(path.read_text(encoding="utf-8"))
    catalog = all_catalogs()[language]
    for key, value in given.items():
        message_id: str | tuple[str, ...] = tuple(json.loads(key)) if key.startswith('["') else key
        message = catalog.get(message_id if isinstance(message_id, str) else message_id[0])
        if message is None or not value:
            continue
        if isinstance(message.id, tuple):
            forms = value if isinstance(value, list) else [value]
            message.string = tuple(forms[: catalog.num_plurals] + [forms[-1]] * (catalog.num_plurals - len(forms)))
        else:
            message.string = value if isinstance(value, str) else value[0]
        message.flags.discard("fuzzy")
    po_path(language).parent.mkdir(parents=True, exist_ok=True)
    po_path(language).write_bytes(po_bytes(catalog))
    update()


def main(arguments: list[str]) -> None:
    if arguments[:1] == ["update"]:
        update()
    elif arguments[:1] == ["todo"] and len(arguments) == 2:
        _todo(Language(arguments[1]))
    elif arguments[:1] == ["fill"] and len(arguments) == 3:
        _fill(Language(arguments[1]), Path(arguments[2]))
    else:
        raise SystemExit("usage: python -m tests.support.messages update | todo LANG | fill LANG FILE.json")


if __name__ == "__main__":
    main(sys.argv[1:])
