"""The tokenizer is the contract between the FTS5 index and every query; these pin that contract down."""

from __future__ import annotations

import re
import sqlite3
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram_memory.engine.recall.text import STOP_WORDS, _runs, fold, query_terms, stem, tokenize, words

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


def test_words_keep_cjk_runs_whole_when_script_is_han_kana_or_hangul() -> None:
    assert words("日本語のテキスト") == ["日本语のテキスト"]
    assert words("中文abc") == ["中文", "abc"]
    assert words("한국어 문장입니다") == ["한국어", "문장입니다"]


def test_words_drop_katakana_middle_dot_when_between_kana() -> None:
    assert words("コーヒー・カップ") == ["コーヒー", "カップ"]


def test_words_split_cjk_from_digits_and_latin_when_mixed_in_one_run() -> None:
    assert words("1945년 8월 API서버") == ["1945", "년", "8", "월", "api", "서버"]


# --- CJK analysis ----------------------------------------------------------------------------------


def test_tokenize_cuts_hangul_into_bigrams_when_particles_differ() -> None:
    # The particle changes (를 / 로): every bigram of the stem is shared.
    with_object = tokenize("데이터베이스를")
    with_means = tokenize("데이터베이스로")
    assert with_object == ["데이", "이터", "터베", "베이", "이스", "스를"]
    assert set(with_object) & set(with_means) == {"데이", "이터", "터베", "베이", "이스"}


def test_tokenize_keeps_a_lone_character_when_the_run_has_one() -> None:
    assert tokenize("년") == ["년"]
    assert tokenize("の") == ["の"]
    assert tokenize("水") == ["水"]


def test_tokenize_adds_each_han_character_when_run_has_han() -> None:
    assert tokenize("東京都に住む") == ["东京", "京都", "都に", "に住", "住む", "东", "京", "都", "住"]


def test_tokenize_adds_no_single_kana_or_hangul_when_run_is_longer() -> None:
    assert tokenize("ひらがな") == ["ひら", "らが", "がな"]
    assert tokenize("한국어") == ["한국", "국어"]


def test_fold_maps_traditional_to_simplified_when_text_has_han() -> None:
    assert fold("臺灣大學的發展") == "台湾大学的发展"
    assert tokenize("國立臺灣大學") == tokenize("国立台湾大学")
    assert query_terms("資料庫在哪裡") == query_terms("资料库在哪里")


def test_fold_leaves_kana_and_hangul_alone_when_simplifying_han() -> None:
    assert fold("図書館で勉強する") == "図书馆で勉强する"
    assert fold("한국 漢字") == "한국 汉字"


def test_query_terms_keep_every_cjk_gram_when_query_is_cjk() -> None:
    assert query_terms("데이터베이스로 무엇을 하나요?") == [
        "데이",
        "이터",
        "터베",
        "베이",
        "이스",
        "스로",
        "무엇",
        "엇을",
        "하나",
        "나요",
    ]


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
@given(st.one_of(st.text(), st.text(st.characters(max_codepoint=127))))
def test_tokens_are_the_stemmed_words_when_text_has_no_cjk_run(text: str) -> None:
    # tokenize takes a shortcut for ASCII text; it must cut exactly as the general path does.
    if not any(cjk for _, cjk in _runs(text)):
        assert tokenize(text) == [stem(word) for word in words(text)]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_query_terms_empty_only_when_text_has_no_words(text: str) -> None:
    assert (query_terms(text) == []) == (words(text) == [])


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_tokens_split_back_when_space_joined_as_the_stores_keep_them(text: str) -> None:
    # The stores keep a field's tokens space-joined and split them again: a token never holds a separator.
    tokens = tokenize(text)
    assert " ".join(tokens).split() == tokens
    assert words(" ".join(tokens)) == tokens


# Text drawn from the scripts the analyser treats specially, with separators and Latin mixed in.
_CJK_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),  # Han
        st.characters(min_codepoint=0x3040, max_codepoint=0x30FF),  # Kana
        st.characters(min_codepoint=0xAC00, max_codepoint=0xD7A3),  # Hangul syllables
        st.characters(min_codepoint=0x20000, max_codepoint=0x2A6DF),  # Han extension B
        st.sampled_from([*" ,.。、・ー々abcXYZ019_-", "\u3007"]),  # U+3007: the ideographic zero
    ),
    max_size=40,
)


def test_folding_a_folded_han_character_changes_nothing() -> None:
    # Exhaustive over the BMP's Han blocks: t2s maps some variants onto characters it maps again (薴 → 苧 → 苎).
    blocks = [*range(0x3400, 0x4DC0), *range(0x4E00, 0xA000), *range(0xF900, 0xFB00)]
    changed = [chr(cp) for cp in blocks if fold(fold(chr(cp))) != fold(chr(cp))]
    assert changed == []
    assert fold("薴") == fold("苧") == fold("苎")


@settings(max_examples=300, deadline=None)
@given(_CJK_TEXT)
def test_tokens_split_back_when_text_is_cjk(text: str) -> None:
    tokens = tokenize(text)
    assert " ".join(tokens).split() == tokens
    assert words(" ".join(tokens)) == tokens
    assert all(TOKEN_RE.match(token) for token in tokens)


@settings(max_examples=300, deadline=None)
@given(_CJK_TEXT)
def test_query_terms_are_index_tokens_when_text_is_cjk(text: str) -> None:
    # Every query term of a text is among the text's own index tokens, so a memory finds itself.
    assert set(query_terms(text)) <= set(tokenize(text))


@needs_fts5
@settings(max_examples=200, deadline=None)
@given(_CJK_TEXT)
def test_tokens_survive_fts5_unicode61_when_text_is_cjk(text: str) -> None:
    tokens = tokenize(text)
    assert _fts5_tokens(" ".join(tokens)) == tokens


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
    start = time.thread_time()  # CPU time of this thread: other load on the machine does not count
    tokens = tokenize(text)
    elapsed = time.thread_time() - start
    assert len(tokens) > 9000
    assert elapsed < 0.25  # a few ms in practice; generous for slow CI machines
