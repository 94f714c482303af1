"""The message catalogues (GNU gettext, compiled from the `.po` files beside this module) and the language
the current person is being answered in.

The language is a context variable: the CLI sets it once per command, the console once per request, so
two browsers asking in two languages are each answered in theirs. Messages are English source strings;
a catalogue without an entry gives the English back, and a test keeps every catalogue complete.
"""

from __future__ import annotations

import gettext as stdlib_gettext
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from pathlib import Path

from engram_memory.host.language.choice import DEFAULT, Language

DOMAIN = "engram"
LOCALE_DIR = Path(__file__).resolve().parent / "locales"

_speaking: ContextVar[Language] = ContextVar("engram_memory_language", default=DEFAULT)


@cache
def translations(language: Language) -> stdlib_gettext.NullTranslations:
    if language is Language.EN:
        return stdlib_gettext.NullTranslations()
    return stdlib_gettext.translation(DOMAIN, LOCALE_DIR, languages=[language.directory], fallback=True)


def current() -> Language:
    return _speaking.get()


@contextmanager
def speaking(language: Language) -> Iterator[None]:
    token = _speaking.set(language)
    try:
        yield
    finally:
        _speaking.reset(token)


def speak(language: Language) -> None:
    """For a whole process or request task that ends with the language it chose."""
    _speaking.set(language)


def _(message: str) -> str:
    return translations(_speaking.get()).gettext(message)


def ngettext(singular: str, plural: str, count: int) -> str:
    return translations(_speaking.get()).ngettext(singular, plural, count)


def N_(message: str) -> str:  # noqa: N802 - the name gettext's extractors know
    """Marks a message for the catalogue where it is declared; `_` translates it where it is shown."""
    return message
