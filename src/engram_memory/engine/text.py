"""One tokenizer for indexing and querying, so a stored memory and a query about it meet on the same terms.

Every token is lowercase letters/digits only, so it passes SQLite FTS5 ``unicode61`` unchanged.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
import unicodedata

import snowballstemmer

__all__ = ["STOP_WORDS", "fold", "query_terms", "stem", "tokenize", "words"]

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

# Han ideographs (incl. iteration/number marks and the whole of planes 2-3), Hiragana and Katakana:
# scripts written without spaces, so each character stands as its own word.
_CJK = (
    "\u3005\u3007\u3021-\u3029\u3038-\u303b"
    "\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U0001b000-\U0001b16f\U00020000-\U0003ffff"
)
# Letters since Unicode 8 that SQLite's unicode61 tables (Unicode 6.1 categories) still class as
# spacing marks, i.e. separators: New Tai Lue vowel signs and tone marks, Vedic ardhavisarga. Treating
# them as separators here too keeps every token intact through FTS5 (a test checks every code point).
_FTS5_SEPARATORS = "\u19b0-\u19c0\u19c8\u19c9\u1cf2\u1cf3"
# One regex for all word splitting: a run of letters/digits outside the CJK set, or one CJK letter.
# ``[^\W_]`` is "alphanumeric", so underscore and every punctuation/symbol/mark separate words.
_WORD_RE = re.compile(rf"[^\W_{_CJK}{_FTS5_SEPARATORS}]+|(?=\w)[{_CJK}]")

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


def fold(text: str) -> str:
    """Erase the differences (width, case, accents) that a person searching would not mean to make."""
    if text.isascii():
        return text.lower()
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", text).casefold())
    bmp_marks, astral_marks = _mark_tables()
    text = bmp_marks.sub("", text)
    text = _ASTRAL_RUN_RE.sub(lambda run: run[0].translate(astral_marks), text)
    # NFKD split Hangul syllables into jamo and voiced kana into kana + mark; recompose both.
    return unicodedata.normalize("NFC", text)


def words(text: str) -> list[str]:
    """Word boundaries shared by documents and queries; identifiers like snake_case split into their parts."""
    return _WORD_RE.findall(fold(text))


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Conflate English inflections ("runs", "running") so either form finds the other; cached for speed."""
    if not _LATIN_RE.fullmatch(word):
        return word
    with _STEMMER_LOCK:
        result: str = _STEMMER.stemWord(word)
    return result


def tokenize(text: str) -> list[str]:
    """Index-side tokens: stop words stay, so field lengths (and BM25 length normalisation) stay honest."""
    return [stem(w) for w in words(text)]


def query_terms(text: str) -> list[str]:
    """Query-side terms: stop words carry no signal unless they are all the query has."""
    all_words = words(text)
    content = [w for w in all_words if w not in STOP_WORDS]
    return list(dict.fromkeys(stem(w) for w in (content or all_words)))


STOP_WORDS: frozenset[str] = (
    frozenset(w for entry in _SNOWBALL_ENGLISH_STOP.split() for w in words(entry)) - _CONTENT_WORD_FRAGMENTS
)
