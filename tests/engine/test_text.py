"""The tokenizer is the contract between the FTS5 index and every query; these pin that contract down."""

from __future__ import annotations

import re
import sqlite3
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram_memory.engine.text import STOP_WORDS, fold, query_terms, stem, tokenize, words

TOKEN_RE = re.compile(r"^[^\W_]+$")


def _fts5_tokens(text: str) -> list[str]:
    """Tokens as SQLite's own unicode61 tokenizer (the index's configuration) sees the text."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute('CREATE VIRTUAL TABLE t USING fts5(body, tokenize = "unicode61 remove_diacritics 0")')
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        conn.execute("INSERT INTO t(body) VALUES (?)", (text,))
        return [row[0] for row in conn.execute("SELECT term FROM v ORDER BY offset")]
    finally:
        conn.close()


def _has_fts5() -> bool:
    try:
        _fts5_tokens("probe")
    except sqlite3.OperationalError:
        return False
    return True


needs_fts5 = pytest.mark.skipif(not _has_fts5(), reason="this SQLite build lacks FTS5")


# --- folding ---------------------------------------------------------------------------------------


def test_fold_strips_accents_when_latin_has_diacritics() -> None:
    assert fold("Café Crème NAÏVE Ångström") == "cafe creme naive angstrom"


def test_fold_expands_sharp_s_when_casefolding() -> None:
    assert fold("Straße") == "strasse"
    assert fold("STRASSE") == fold("straße")


def test_fold_normalises_fullwidth_when_input_is_fullwidth() -> None:
    assert fold("\uff21\uff22\uff23\uff11\uff12\uff13") == "abc123"  # fullwidth "ABC123"
    assert words("\uff48\uff49\u3000\uff54\uff48\uff45\uff52\uff45") == [
        "hi",
        "there",
    ]  # fullwidth "hi there", ideographic space


def test_fold_keeps_hangul_syllables_when_decomposition_is_undone() -> None:
    assert fold("한국어") == "한국어"


def test_fold_lowercases_when_input_is_ascii() -> None:
    assert fold("Hello World_42") == "hello world_42"


# --- word splitting --------------------------------------------------------------------------------


def test_words_split_when_identifier_is_snake_case() -> None:
    assert words("parse_config_file") == ["parse", "config", "file"]


def test_words_split_when_hyphenated_or_punctuated() -> None:
    assert words("state-of-the-art, e.g. v2.3.1!") == ["state", "of", "the", "art", "e", "g", "v2", "3", "1"]


def test_words_split_each_character_when_script_is_han_or_kana() -> None:
    assert words("日本語のテキスト") == ["日", "本", "語", "の", "テ", "キ", "ス", "ト"]
    assert words("中文abc") == ["中", "文", "abc"]


def test_words_keep_whole_runs_when_script_is_hangul() -> None:
    assert words("한국어 문장입니다") == ["한국어", "문장입니다"]


def test_words_drop_katakana_middle_dot_when_between_kana() -> None:
    assert words("コーヒー・カップ") == ["コ", "ー", "ヒ", "ー", "カ", "ッ", "プ"]


def test_fold_keeps_kana_voicing_when_stripping_diacritics() -> None:
    assert fold("プガ") == "プガ"
    assert fold("\uff8c\uff9f\uff76\uff9e") == "プガ"  # halfwidth "ﾌﾟｶﾞ"


def test_words_empty_when_input_is_empty_or_punctuation_only() -> None:
    assert words("") == []
    assert words("  ... --- ___ !!! ¿? 。、") == []
    assert tokenize("") == []
    assert tokenize("!@#$%^&*()_+") == []
    assert query_terms("?!") == []


# --- stemming --------------------------------------------------------------------------------------


def test_stem_conflates_inflections_when_word_is_english() -> None:
    assert stem("running") == "run"
    assert stem("runs") == "run"
    assert stem("connections") == "connect"
    assert tokenize("Running runs connections") == ["run", "run", "connect"]


def test_stem_returns_word_unchanged_when_not_latin_letters() -> None:
    for word in ("日", "한국어", "москва", "v2", "2024", "ελληνικά"):
        assert stem(word) == word


# --- stop words ------------------------------------------------------------------------------------


def test_stop_words_are_folded_single_words_when_loaded() -> None:
    assert {"the", "and", "of", "is", "t", "don"} <= STOP_WORDS
    assert all(TOKEN_RE.match(w) and fold(w) == w for w in STOP_WORDS)


def test_stop_words_exclude_homonyms_when_snowball_leaves_them_out() -> None:
    # Snowball deliberately keeps "will", "can", "may", "must"; contraction fragments must not sneak them in.
    assert STOP_WORDS.isdisjoint({"will", "can", "may", "must", "won", "let", "us"})


def test_tokenize_keeps_stop_words_when_indexing() -> None:
    assert tokenize("The cat is on the mat") == ["the", "cat", "is", "on", "the", "mat"]


def test_query_terms_drop_stop_words_when_content_words_exist() -> None:
    assert query_terms("What is the state of the connections?") == ["state", "connect"]


def test_query_terms_deduplicate_in_first_seen_order_when_stems_repeat() -> None:
    assert query_terms("running database runs DATABASE") == ["run", "databas"]


def test_query_terms_fall_back_to_all_words_when_only_stop_words() -> None:
    assert query_terms("the") == ["the"]
    assert query_terms("to be or not to be") == ["to", "be", "or", "not"]


def test_query_terms_split_contractions_when_apostrophe_present() -> None:
    assert query_terms("don't delete it") == ["delet"]


# --- properties ------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_tokens_are_casefolded_alphanumerics_when_text_is_arbitrary(text: str) -> None:
    for token in tokenize(text):
        assert TOKEN_RE.match(token)
        assert token.casefold() == token
    for term in query_terms(text):
        assert TOKEN_RE.match(term)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_query_terms_empty_only_when_text_has_no_words(text: str) -> None:
    assert (query_terms(text) == []) == (words(text) == [])


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_tokenize_is_idempotent_when_applied_to_its_own_output(text: str) -> None:
    # Stored tokens are re-read from FTS5 and compared with query terms: re-tokenizing must not change them.
    tokens = tokenize(text)
    assert words(" ".join(tokens)) == tokens


@needs_fts5
@settings(max_examples=200, deadline=None)
@given(st.text())
def test_tokens_survive_fts5_unicode61_when_text_is_arbitrary(text: str) -> None:
    tokens = tokenize(text)
    assert _fts5_tokens(" ".join(tokens)) == tokens


@needs_fts5
def test_tokens_survive_fts5_unicode61_when_any_code_point_is_inside_a_word() -> None:
    # Exhaustive: catches letters whose Unicode category changed after SQLite's unicode61 tables.
    # Checks words(): stemming only rewrites Latin words into ASCII letters (covered by the property above).
    chars = [chr(cp) for cp in range(sys.maxunicode + 1) if not 0xD800 <= cp <= 0xDFFF]
    tokens = words(" ".join(f"a{c}b" for c in chars))
    assert _fts5_tokens(" ".join(tokens)) == tokens


# --- performance -----------------------------------------------------------------------------------


def test_tokenize_is_fast_when_text_is_64_kib() -> None:
    sentence = "The server recorded 42 decisions about parse_config errors while agents were running queries. "
    text = (sentence * (65536 // len(sentence) + 1))[:65536]
    tokenize(text)
    start = time.perf_counter()
    tokens = tokenize(text)
    elapsed = time.perf_counter() - start
    assert len(tokens) > 9000
    assert elapsed < 0.25  # a few ms in practice; generous for loaded CI machines
