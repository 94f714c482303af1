"""One analyser for indexing and querying, shared by both stores, so a memory and a query about it meet on
the same terms in every language our users write.

Space-separated scripts give words: folded (case, width, accents), English ones stemmed. Han, Kana and
Hangul are written without spaces or with particles glued to their words (`데이터베이스를` /
`데이터베이스로`), so each run of them gives its overlapping character bigrams, plus every Han character
on its own (Han characters are words by themselves); Traditional Chinese is folded to Simplified first.
The choice was measured (docs/decisions/0013-cjk-analysis.md). Every token is lowercase letters/digits
only, so it passes SQLite FTS5 ``unicode61`` and a PostgreSQL ``tsvector`` unchanged.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import unicodedata
from collections.abc import Sequence
from importlib import metadata
from typing import Any

import snowballstemmer

__all__ = [
    "STOP_WORDS",
    "TOKENIZER",
    "fold",
    "query_terms",
    "simplified",
    "stem",
    "subject",
    "tokenize",
    "tokenizer_id",
    "words",
]

# This module's analysis, by version: any change to the tokens it produces for some text must change it,
# so that scopes indexed before are re-indexed (engine/recall/reindex.py). 3: Traditional folded to a
# fixed point (see _Simplifier).
TOKENIZER = "engram-text-3"

# The Snowball English stop list (snowballstem.org/algorithms/english/stop.txt), every active entry,
# in the order and groups of that file. Entries that the list itself leaves commented out (us, will,
# shall, can, may, might, must, and the "commonest words" appendix) stay out on purpose.
_SNOWBALL_ENGLISH_STOP = """
i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
she her hers herself it its itself they them their theirs themselves
what which who whom this that these those
am is are was were be been being have has had having do does did doing
would should could ought
i'm you're he's she's it's we're they're i've you've we've they've i'd you'd he'd she'd we'd they'd
i'll you'll he'll she'll we'll they'll
isn't aren't wasn't weren't hasn't haven't hadn't doesn't don't didn't
won't wouldn't shan't shouldn't can't cannot couldn't mustn't
let's that's who's what's here's there's when's where's why's how's
a an the
and but if or because as until while
of at by for with about against between into through during before after above below to from up down
in out on off over under
again further then once here there when where why how
all any both each few more most other some such no nor not only own same so than too very
"""

# Splitting contractions at the apostrophe (as ``words`` does) leaves fragments; these three are
# ordinary content words ("we won", "a tin can", "let the flat") that the Snowball list deliberately
# does not stop, so the fragment of "won't"/"can't"/"let's" must not stop them either.
_CONTENT_WORD_FRAGMENTS = frozenset({"won", "can", "let"})

# Han ideographs that are words on their own (unified, extensions, compatibility, the ideographic zero
# and Suzhou numerals), as opposed to marks such as 々 (iteration) that only make sense inside a run.
_HAN = "\u3007\u3021-\u3029\u3038-\u303a\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff"
# Scripts written without spaces between words (Han with its marks, Hiragana, Katakana) and Hangul,
# whose words carry their particles and endings: runs of these are cut into bigrams.
_CJK = (
    _HAN + "\u3005\u303b"
    "\u3040-\u30ff\u31f0-\u31ff\U0001b000-\U0001b16f"
    "\u1100-\u11ff\u3130-\u318f\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff"
)
# Letters since Unicode 8 that SQLite's unicode61 tables (Unicode 6.1 categories) still class as
# spacing marks, i.e. separators: New Tai Lue vowel signs and tone marks, Vedic ardhavisarga. Treating
# them as separators here too keeps every token intact through FTS5 (a test checks every code point).
_FTS5_SEPARATORS = "\u19b0-\u19c0\u19c8\u19c9\u1cf2\u1cf3"
# One regex for all word splitting: a run of CJK letters (group 1), or a run of other letters/digits.
# ``[^\W_]`` is "alphanumeric", so underscore and every punctuation/symbol/mark separate words.
_WORD_RE = re.compile(rf"((?:(?=\w)[{_CJK}])+)|[^\W_{_CJK}{_FTS5_SEPARATORS}]+")
# The same words in text without a CJK character, where the first alternative of _WORD_RE cannot match.
_PLAIN_WORD_RE = re.compile(rf"[^\W_{_CJK}{_FTS5_SEPARATORS}]+")
_HAN_RE = re.compile(f"[{_HAN}]")
_CJK_CHAR_RE = re.compile(f"[{_CJK}]")

# Latin-script letters as they look after folding; only these go through the English stemmer.
_LATIN_RE = re.compile("[a-z\u00df-\u00f6\u00f8-\u00ff\u0100-\u024f\u1e00-\u1eff]+")

_STEMMER = snowballstemmer.stemmer("english")
# The pure-Python Snowball stemmer keeps per-call state on the object, so concurrent misses must queue.
_STEMMER_LOCK = threading.Lock()

# Kana voicing marks (dakuten, handakuten) change the sound, not the accent: "プ" (pu) is not "フ" (fu).
# They survive stripping and NFC recomposes them onto their kana.
_KANA_VOICING = frozenset({0x3099, 0x309A})
_ASTRAL_RUN_RE = re.compile("[\U00010000-\U0010ffff]+")


@functools.cache
def tokenizer_id() -> str:
    """What the tokens depend on: this analysis, the Unicode tables of this Python (folding, word
    characters) and the versions of the conversion table and stemmer. Named in rank receipts and kept
    by each store for its scopes, so an index built by any other combination is known to be stale."""
    return (
        f"{TOKENIZER}+unicode-{unicodedata.unidata_version}"
        f"+opencc-{metadata.version('opencc')}+snowballstemmer-{metadata.version('snowballstemmer')}"
    )


@functools.cache
def _mark_tables() -> tuple[re.Pattern[str], dict[int, None]]:
    """Built on first non-ASCII input from this Python's own Unicode tables, so they match NFKD exactly.

    BMP marks go in a regex class (compiled to a bitmap: fast); astral marks in a translate table that
    only astral runs (emoji, rare Han, historic scripts) ever consult, as a long astral class is slow.
    """
    bmp: list[str] = []
    astral: dict[int, None] = {}
    for cp in range(sys.maxunicode + 1):
        if cp not in _KANA_VOICING and unicodedata.category(chr(cp)).startswith("M"):
            if cp <= 0xFFFF:
                bmp.append(re.escape(chr(cp)))
            else:
                astral[cp] = None
    return re.compile("[" + "".join(bmp) + "]+"), astral


# t2s maps a few variants onto characters it maps again (薴 → 苧 → 苎): conversion repeats until the text
# stops changing, so that every form meets every other and folding a folded text changes nothing. Chains
# in OpenCC's table are two steps long; the bound only guards against a table that cycles.
_SIMPLIFY_PASSES = 4


class _Simplifier:
    """OpenCC's maintained Traditional-to-Simplified table (`t2s`: phrases, then characters), loaded on the
    first Han text. One converter per thread, as the binding does not promise to be thread-safe."""

    def __init__(self) -> None:
        self._local = threading.local()

    def __call__(self, text: str) -> str:
        converter: Any = getattr(self._local, "converter", None)
        if converter is None:
            import opencc

            converter = opencc.OpenCC("t2s")
            self._local.converter = converter
        for _ in range(_SIMPLIFY_PASSES):
            converted: str = converter.convert(text)
            if converted == text:
                break
            text = converted
        return text


_simplify = _Simplifier()


def simplified(text: str) -> str:
    """The text with Traditional Chinese characters folded to Simplified (OpenCC t2s, to a fixed point)."""
    return _simplify(text)


def fold(text: str) -> str:
    """Erase the differences (width, case, accents, Traditional/Simplified) a person searching would not
    mean to make."""
    if text.isascii():
        return text.lower()
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    bmp_marks, astral_marks = _mark_tables()
    text = bmp_marks.sub("", text)
    text = _ASTRAL_RUN_RE.sub(lambda run: run[0].translate(astral_marks), text)
    # NFKD split Hangul syllables into jamo and voiced kana into kana + mark; recompose both.
    text = unicodedata.normalize("NFC", text)
    return _simplify(text) if _HAN_RE.search(text) else text


def _runs(text: str) -> list[tuple[str, bool]]:
    """The folded text's words in order, each flagged when it is a CJK run."""
    return _folded_runs(fold(text))


def _folded_runs(folded: str) -> list[tuple[str, bool]]:
    return [(match[0], bool(match[1])) for match in _WORD_RE.finditer(folded)]


def words(text: str) -> list[str]:
    """Word boundaries shared by documents and queries: identifiers like snake_case split into their
    parts, and a run of CJK letters is one word (``tokenize`` cuts it into bigrams)."""
    return [word for word, _ in _runs(text)]


def _grams(run: str) -> list[str]:
    """A CJK run's overlapping bigrams (a lone character stands for itself), then its Han characters alone.

    Bigrams let partial words meet (a Korean stem with another particle, a Chinese word inside a longer
    one); single Han characters let a one-character word of a query find it inside a longer run.
    """
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)] + _HAN_RE.findall(run)


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Conflate English inflections ("runs", "running") so either form finds the other; cached for speed."""
    if not _LATIN_RE.fullmatch(word):
        return word
    with _STEMMER_LOCK:
        result: str = _STEMMER.stemWord(word)
    return result


def _tokens(runs: list[tuple[str, bool]]) -> list[str]:
    tokens: list[str] = []
    for word, cjk in runs:
        if cjk:
            tokens.extend(_grams(word))
        else:
            tokens.append(stem(word))
    return tokens


def tokenize(text: str) -> list[str]:
    """Index-side tokens: stop words stay, so field lengths (and BM25 length normalisation) stay honest."""
    folded = fold(text)
    if folded.isascii():  # most notes: no CJK run to cut, so no per-word flags to carry
        return [stem(word) for word in _PLAIN_WORD_RE.findall(folded)]
    return _tokens(_folded_runs(folded))


def subject(tokens: Sequence[str]) -> str:
    """Whom or what a memory is about, from its primary text's tokens: the first one when it is a word
    ("Caroline: ..." → "carolin"), else nothing. A CJK bigram is not a name: text without spaces
    shows no word to take, and boosting every memory that opens with the same two characters would
    only reward chance."""
    return tokens[0] if tokens and not _CJK_CHAR_RE.search(tokens[0]) else ""


def query_terms(text: str) -> list[str]:
    """Query-side terms: stop words carry no signal unless they are all the query has."""
    runs = _runs(text)
    content = [(word, cjk) for word, cjk in runs if cjk or word not in STOP_WORDS]
    return list(dict.fromkeys(_tokens(content or runs)))


STOP_WORDS: frozenset[str] = (
    frozenset(w for entry in _SNOWBALL_ENGLISH_STOP.split() for w in words(entry)) - _CONTENT_WORD_FRAGMENTS
)
