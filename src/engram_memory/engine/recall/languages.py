"""Which of its users' languages a text is written in, told by its letters alone.

The semantic channel removes each language's mean direction from a multilingual model's vectors
(semantic_models.py, decision 0025), so it must know a memory's and a query's language. The five
languages this product serves are told apart by script, which needs no model and never guesses: Kana
means Japanese (Korean and Chinese never use it), Hangul Korean, Han without either Chinese (Traditional
when OpenCC's Traditional-to-Simplified table changes it), Latin letters English. Names and terms in Latin
letters inside Korean, Chinese or Japanese text are common ("Terraform 상태 파일"), so the script with the
most weight wins, a Han, Kana or Hangul letter weighing as much as CJK_LETTER_WEIGHT Latin ones (about a
word's worth).
"""

from __future__ import annotations

import functools
import re

from engram_memory.engine.recall.text import simplified

__all__ = ["CHINESE", "ENGLISH", "JAPANESE", "KOREAN", "LANGUAGES", "OTHER", "TRADITIONAL_CHINESE", "language_of"]

ENGLISH = "en"
KOREAN = "ko"
CHINESE = "zh"
TRADITIONAL_CHINESE = "zh-hant"
JAPANESE = "ja"
OTHER = "other"  # letters of another script (Cyrillic, Arabic, Thai…), or no letters at all
LANGUAGES: tuple[str, ...] = (ENGLISH, KOREAN, CHINESE, TRADITIONAL_CHINESE, JAPANESE)

CJK_LETTER_WEIGHT = 3

_HANGUL = re.compile("[\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff]")
_KANA = re.compile("[\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9f]")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]")
_LATIN = re.compile("[A-Za-z\u00c0-\u024f\u1e00-\u1eff\uff21-\uff3a\uff41-\uff5a]")
_LETTER = re.compile(r"[^\W\d_]")


def _traditional(text: str) -> bool:
    """Whether the text's Han characters read as Traditional: OpenCC's t2s table changes them."""
    han = "".join(_HAN.findall(text))
    return simplified(han) != han


@functools.lru_cache(maxsize=4096)
def language_of(text: str) -> str:
    """One of LANGUAGES, or OTHER."""
    if text.isascii():
        return ENGLISH if _LATIN.search(text) else OTHER
    hangul = len(_HANGUL.findall(text))
    kana = len(_KANA.findall(text))
    han = len(_HAN.findall(text))
    latin = len(_LATIN.findall(text))
    other = len(_LETTER.findall(text)) - hangul - kana - han - latin
    cjk = CJK_LETTER_WEIGHT * (hangul + kana + han)
    if cjk and cjk >= max(latin, other):
        if kana:
            return JAPANESE
        if hangul >= han:
            return KOREAN
        return TRADITIONAL_CHINESE if _traditional(text) else CHINESE
    if latin and latin >= other:
        return ENGLISH
    return OTHER
