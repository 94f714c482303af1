"""Which of the host's languages a person asked for: from `--lang`, the POSIX locale variables, a
browser's Accept-Language or the console's own setting.

Chinese is two catalogues, by script: a tag naming Hant, or Taiwan, Hong Kong or Macau, gets Traditional
characters; any other Chinese tag gets Simplified. A tag no catalogue serves is skipped, and a person
who asked for nothing the host speaks is answered in English.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from babel import Locale, UnknownLocaleError
from babel.core import parse_locale


class Language(StrEnum):
    """Each value is the tag people type (`--lang zh-Hans`); `directory` names its catalogue's folder."""

    EN = "en"
    KO = "ko"
    ZH_HANS = "zh-Hans"
    ZH_HANT = "zh-Hant"
    JA = "ja"

    @property
    def directory(self) -> str:
        return self.value.replace("-", "_")

    @property
    def babel(self) -> Locale:
        return Locale.parse(self.directory)


DEFAULT = Language.EN
_TRADITIONAL_TERRITORIES = frozenset({"TW", "HK", "MO"})


def from_tag(tag: str) -> Language | None:
    """The catalogue serving a BCP 47 tag or a POSIX locale name (`ko-KR`, `zh_TW.UTF-8`, `ja_JP@x`)."""
    name = tag.strip().split(".", 1)[0].split("@", 1)[0].replace("-", "_")
    if not name or name in ("C", "POSIX", "*"):
        return None
    try:
        _language, territory, script, *_rest = parse_locale(name)
        locale = Locale.parse(name)  # fills in the script a bare territory implies (zh_TW: Hant)
    except (UnknownLocaleError, ValueError, TypeError):
        return None
    if locale.language == "zh":
        named = script or locale.script  # a script the tag names outranks the territory's usual one
        traditional = named == "Hant" or (script is None and territory in _TRADITIONAL_TERRITORIES)
        return Language.ZH_HANT if traditional else Language.ZH_HANS
    for language in Language:
        if language.value == locale.language:
            return language
    return None


def requested(text: str) -> Language:
    """What `--lang` names, or ValueError listing the choices."""
    language = from_tag(text)
    if language is None:
        raise ValueError(text)
    return language


def from_environment(environ: Mapping[str, str]) -> Language:
    """In gettext's order: LANGUAGE (a colon list, of which the first language the host speaks wins),
    then LC_ALL, LC_MESSAGES and LANG, of which the first one set decides."""
    for variable in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(variable, "").strip()
        if not value:
            continue
        for tag in value.split(":"):
            language = from_tag(tag)
            if language is not None:
                return language
        if variable != "LANGUAGE":
            return DEFAULT
    return DEFAULT


def from_accept_language(header: str | None) -> Language:
    """The browser's best-liked language the host speaks (RFC 9110 quality values; ties keep the order)."""
    ranked: list[tuple[float, int, str]] = []
    for position, part in enumerate((header or "").split(",")[:32]):
        tag, _, parameters = part.partition(";")
        quality = 1.0
        for parameter in parameters.split(";"):
            key, _, value = parameter.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if tag.strip() and 0 < quality <= 1:
            ranked.append((-quality, position, tag.strip()))
    for _, _, tag in sorted(ranked):
        language = from_tag(tag)
        if language is not None:
            return language
    return DEFAULT
