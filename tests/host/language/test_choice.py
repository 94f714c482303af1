"""Which language a person asked for: tags, POSIX locale names, the locale variables and Accept-Language."""

from __future__ import annotations

import pytest

from engram_memory.host.language.catalogue import speaking
from engram_memory.host.language.choice import (
    Language,
    from_accept_language,
    from_environment,
    from_tag,
    requested,
)
from engram_memory.host.language.formats import number, when


@pytest.mark.parametrize(
    ("tag", "language"),
    [
        ("ko", Language.KO),
        ("ko_KR.UTF-8", Language.KO),
        ("ko-KR", Language.KO),
        ("ja_JP.eucJP", Language.JA),
        ("zh", Language.ZH_HANS),
        ("zh-CN", Language.ZH_HANS),
        ("zh_SG.UTF-8", Language.ZH_HANS),
        ("zh-Hans", Language.ZH_HANS),
        ("zh_TW.UTF-8", Language.ZH_HANT),
        ("zh-HK", Language.ZH_HANT),
        ("zh-MO", Language.ZH_HANT),
        ("zh-Hant", Language.ZH_HANT),
        ("zh-Hant-CN", Language.ZH_HANT),
        ("en_GB.UTF-8", Language.EN),
        ("fr_FR", None),
        ("C", None),
        ("C.UTF-8", None),
        ("POSIX", None),
        ("", None),
        ("*", None),
        ("not a tag at all", None),
    ],
)
def test_a_tag_names_the_catalogue_that_serves_it(tag: str, language: Language | None) -> None:
    assert from_tag(tag) is language


def test_lang_values_people_type_and_one_no_catalogue_serves() -> None:
    assert requested("zh-Hans") is Language.ZH_HANS and requested("KO") is Language.KO
    with pytest.raises(ValueError):
        requested("fr")


@pytest.mark.parametrize(
    ("environ", "language"),
    [
        ({}, Language.EN),
        ({"LANG": "ko_KR.UTF-8"}, Language.KO),
        ({"LANG": "ko_KR.UTF-8", "LC_MESSAGES": "ja_JP.UTF-8"}, Language.JA),
        ({"LANG": "ko_KR.UTF-8", "LC_ALL": "zh_TW.UTF-8"}, Language.ZH_HANT),
        ({"LANGUAGE": "fr:zh_CN:ko", "LANG": "ja_JP.UTF-8"}, Language.ZH_HANS),
        ({"LANGUAGE": "fr", "LANG": "ja_JP.UTF-8"}, Language.JA),
        ({"LC_ALL": "C.UTF-8", "LANG": "ko_KR.UTF-8"}, Language.EN),
        ({"LANG": ""}, Language.EN),
    ],
)
def test_the_locale_variables_in_gettexts_order(environ: dict[str, str], language: Language) -> None:
    assert from_environment(environ) is language


@pytest.mark.parametrize(
    ("header", "language"),
    [
        (None, Language.EN),
        ("", Language.EN),
        ("ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7", Language.KO),
        ("fr-FR,fr;q=0.9,zh-TW;q=0.8", Language.ZH_HANT),
        ("en;q=0.5, ja;q=0.9", Language.JA),
        ("zh-CN;q=0, ko;q=0.1", Language.KO),
        ("ja;q=x, ko", Language.KO),
        ("de, fr", Language.EN),
        ("*", Language.EN),
        (",,;;q=,", Language.EN),
    ],
)
def test_a_browsers_accept_language_by_its_qualities(header: str | None, language: Language) -> None:
    assert from_accept_language(header) is language


def test_a_flood_of_languages_is_read_only_so_far() -> None:
    assert from_accept_language("fr," * 100_000 + "ko") is Language.EN


def test_dates_and_numbers_in_each_language() -> None:
    moment = 1_796_640_869_000  # 2026-12-07T10:54:29Z
    with speaking(Language.EN):
        assert when(moment) == "2026-12-07T10:54:29.000Z" and number(1234567) == "1,234,567"
    with speaking(Language.KO):
        assert when(moment) == "2026. 12. 7. 오전 10:54:29 UTC"
    with speaking(Language.ZH_HANS):
        assert when(moment) == "2026年12月7日 10:54:29 UTC"
    with speaking(Language.JA):
        assert when(moment) == "2026/12/07 10:54:29 UTC" and number(1234567) == "1,234,567"
    assert when(None) == "-"
