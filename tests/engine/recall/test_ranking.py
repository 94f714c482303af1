"""BM25F and recency are the only judgement in lexical search; these check each constant does its job."""

from __future__ import annotations

import itertools
import math
import random
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engram_memory.engine.recall.ranking import (
    FIELD_WEIGHTS,
    FIELDS,
    FORMULA_REF,
    K1,
    MAX_RANKED_TERMS,
    RECENCY_HALF_LIFE_MS,
    RECENCY_WEIGHT,
    B,
    CorpusStats,
    Document,
    Scored,
    blend,
    bm25f,
    idf,
    rank,
    rarest_terms,
    recency,
)

DAY_MS = 24 * 3600 * 1000


def _stats(n: int = 10, avg: float = 4.0) -> CorpusStats:
    return CorpusStats(doc_count=n, avg_field_len=dict.fromkeys(FIELDS, avg))


def _doc(doc_id: str, **fields: list[str]) -> Document:
    return Document(doc_id=doc_id, fields=fields)


# --- idf -------------------------------------------------------------------------------------------


def test_idf_decreases_when_df_grows() -> None:
    values = [idf(df, 100) for df in range(101)]
    assert all(a > b for a, b in itertools.pairwise(values))


@given(st.integers(-5, 1000), st.integers(-5, 1000))
def test_idf_is_non_negative_when_inputs_are_arbitrary(df: int, n: int) -> None:
    assert idf(df, n) >= 0.0


def test_idf_matches_formula_when_df_within_corpus() -> None:
    assert idf(3, 10) == pytest.approx(math.log(1 + 7.5 / 3.5), abs=1e-12)


# --- bm25f -----------------------------------------------------------------------------------------


def test_bm25f_matches_hand_computation_when_two_terms_span_fields() -> None:
    stats = CorpusStats(doc_count=10, avg_field_len={"primary": 4.0, "context": 2.0})
    doc = _doc("d", primary=["alpha", "beta"], context=["alpha", "gamma", "delta", "alpha"])
    # alpha: idf = ln(22/7); primary norm = .25 + .75*2/4 = .625 -> 3*1/.625 = 4.8;
    #        context norm = .25 + .75*4/2 = 1.75 -> 1*2/1.75 = 8/7; tf~ = 208/35; sat = 208/250 = .832
    # beta:  idf = ln(22/3); tf~ = 4.8; sat = 4.8/6 = .8.  "omega" is absent and adds nothing.
    expected = 0.832 * math.log(22 / 7) + 0.8 * math.log(22 / 3)
    score = bm25f(["alpha", "beta", "omega"], doc, {"alpha": 3, "beta": 1, "omega": 2}, stats)
    assert abs(score - expected) < 1e-9


def test_bm25f_prefers_primary_when_same_term_is_in_context() -> None:
    stats, df = _stats(), {"cache": 2}
    primary = bm25f(["cache"], _doc("p", primary=["cache", "x", "y", "z"]), df, stats)
    context = bm25f(["cache"], _doc("c", context=["cache", "x", "y", "z"]), df, stats)
    assert primary > context > 0.0


def test_bm25f_orders_fields_by_weight_when_term_appears_in_one_field() -> None:
    stats, df = _stats(), {"cache": 2}
    scores = [bm25f(["cache"], _doc(f, **{f: ["cache", "x", "y", "z"]}), df, stats) for f in FIELDS]
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) == len(FIELDS)


def test_bm25f_dilutes_when_field_is_longer() -> None:
    stats, df = _stats(), {"cache": 2}
    short = bm25f(["cache"], _doc("s", primary=["cache", "x"]), df, stats)
    long = bm25f(["cache"], _doc("l", primary=["cache"] + ["x"] * 20), df, stats)
    assert short > long > 0.0


def test_bm25f_saturates_when_term_repeats() -> None:
    stats, df = _stats(), {"cache": 2}
    scores = [bm25f(["cache"], _doc("d", context=["cache"] * n), df, _stats(avg=float(n))) for n in (1, 2, 3, 4, 5, 6)]
    gains = [b - a for a, b in itertools.pairwise(scores)]
    assert all(g > 0 for g in gains)
    assert gains == sorted(gains, reverse=True)
    assert scores[-1] < idf(df["cache"], stats.doc_count)  # bounded by idf * 1 as tf -> infinity


def test_bm25f_counts_term_once_when_query_repeats_it() -> None:
    stats, df, doc = _stats(), {"cache": 2}, _doc("d", primary=["cache"])
    assert bm25f(["cache", "cache"], doc, df, stats) == bm25f(["cache"], doc, df, stats)


def test_bm25f_uses_unit_norm_when_average_length_is_zero() -> None:
    stats = CorpusStats(doc_count=0, avg_field_len={})
    score = bm25f(["x"], _doc("d", primary=["x", "y", "z"]), {"x": 0}, stats)
    tf = FIELD_WEIGHTS["primary"] * 1 / (1 - B + B)
    assert abs(score - idf(1, 0) * tf / (K1 + tf)) < 1e-12


def test_bm25f_is_zero_when_no_term_matches() -> None:
    assert bm25f(["absent"], _doc("d", primary=["present"]), {"absent": 1}, _stats()) == 0.0
    assert bm25f([], _doc("d", primary=["present"]), {}, _stats()) == 0.0


# --- recency and blend -----------------------------------------------------------------------------


def test_recency_halves_when_age_is_one_half_life() -> None:
    assert recency(0) == 1.0
    assert recency(RECENCY_HALF_LIFE_MS) == 0.5
    assert recency(2 * RECENCY_HALF_LIFE_MS) == 0.25
    assert recency(10, half_life_ms=10) == 0.5


def test_recency_is_one_when_age_is_negative() -> None:
    assert recency(-DAY_MS) == 1.0


def test_recency_rejects_half_life_when_not_positive() -> None:
    with pytest.raises(ValueError, match="half_life_ms"):
        recency(1, half_life_ms=0)


@given(st.floats(0, 1e6), st.floats(0, 1))
def test_blend_stays_within_bounds_when_recency_in_unit_interval(relevance: float, rec: float) -> None:
    value = blend(relevance, rec)
    assert (1 - RECENCY_WEIGHT) * relevance - 1e-9 <= value <= relevance + 1e-9


def test_blend_is_extreme_when_recency_is_zero_or_one() -> None:
    assert blend(2.0, 1.0) == 2.0
    assert blend(2.0, 0.0) == pytest.approx(2.0 * (1 - RECENCY_WEIGHT))
    assert blend(2.0, 0.0, weight=0.0) == 2.0


def test_blend_rejects_weight_when_outside_unit_interval() -> None:
    with pytest.raises(ValueError, match="weight"):
        blend(1.0, 1.0, weight=1.5)


# --- rank ------------------------------------------------------------------------------------------


def test_rank_breaks_ties_by_doc_id_when_scores_equal() -> None:
    docs = [_doc(i, primary=["cache"]) for i in ("c", "a", "b")]
    ranked = rank(["cache"], docs, {"cache": 3}, _stats(), ages_ms=dict.fromkeys("abc", 0))
    assert [s.doc_id for s in ranked] == ["a", "b", "c"]
    assert len({s.score for s in ranked}) == 1


def test_rank_is_deterministic_when_input_order_changes() -> None:
    docs = [
        _doc("old", primary=["cache"]),
        _doc("new", primary=["cache"]),
        _doc("weak", citations=["cache", "x", "y"]),
        _doc("strong", primary=["cache", "cache"], decision=["cache"]),
    ]
    ages = {"old": 90 * DAY_MS, "new": 0, "weak": 0, "strong": 5 * DAY_MS}
    forward = rank(["cache"], docs, {"cache": 4}, _stats(), ages_ms=ages)
    backward = rank(["cache"], docs[::-1], {"cache": 4}, _stats(), ages_ms=ages)
    assert forward == backward
    assert [s.doc_id for s in forward] == ["strong", "new", "old", "weak"]


def test_rank_drops_documents_when_bm25f_is_zero() -> None:
    docs = [_doc("hit", primary=["cache"]), _doc("miss", primary=["other"]), _doc("empty")]
    ranked = rank(["cache"], docs, {"cache": 1}, _stats(), ages_ms={"hit": 0, "miss": 0, "empty": 0})
    assert [s.doc_id for s in ranked] == ["hit"]


def test_rank_scores_blend_of_bm25f_and_recency_when_rounded() -> None:
    doc, df, stats = _doc("d", evidence=["cache", "x"]), {"cache": 2}, _stats()
    (scored,) = rank(["cache"], [doc], df, stats, ages_ms={"d": RECENCY_HALF_LIFE_MS})
    expected = round(bm25f(["cache"], doc, df, stats) * (1 - RECENCY_WEIGHT + RECENCY_WEIGHT * 0.5), 9)
    assert scored == Scored("d", expected)


def test_rank_returns_empty_when_no_documents() -> None:
    assert rank(["cache"], [], {}, _stats(0, 0.0), ages_ms={}) == []


# --- formula reference -----------------------------------------------------------------------------


def test_formula_ref_names_every_constant_when_rendered() -> None:
    assert f"k1={K1:g}" in FORMULA_REF
    assert f"b={B:g}" in FORMULA_REF
    for name in FIELDS:
        assert re.search(rf"\b{name}={FIELD_WEIGHTS[name]:g}\b", FORMULA_REF)
    assert f"{RECENCY_WEIGHT:g}*recency" in FORMULA_REF
    assert f"half_life={RECENCY_HALF_LIFE_MS // DAY_MS}d" in FORMULA_REF


def test_formula_ref_is_stable_when_constants_are_defaults() -> None:
    assert FORMULA_REF == (
        "bm25f(k1=1.2,b=0.75,primary=3,decision=2,evidence=1.5,context=1,citations=0.5)"
        "*(0.9+0.1*recency(half_life=30d))"
    )


def test_a_short_query_keeps_every_term_in_its_order() -> None:
    assert rarest_terms(["b", "a", "c"], {"a": 5}) == ["b", "a", "c"]


# The document counts come from a seeded generator: drawing hundreds of list elements one by one through
# hypothesis cost ten seconds for the same coverage.
@given(st.integers(MAX_RANKED_TERMS + 1, 3 * MAX_RANKED_TERMS), st.randoms(use_true_random=False))
def test_a_long_query_keeps_the_rarest_held_terms_in_query_order(length: int, rng: random.Random) -> None:
    docs = [rng.randint(0, 50) for _ in range(length)]
    terms = [f"t{position}" for position in range(len(docs))]
    df = dict(zip(terms, docs, strict=True))
    kept = rarest_terms(terms, df)
    assert len(kept) == MAX_RANKED_TERMS
    assert kept == [term for term in terms if term in set(kept)]
    dropped = [df[term] for term in terms if term not in set(kept)]
    held = [df[term] for term in kept if df[term]]
    # No held term is dropped while a rarer or absent one stays.
    assert not held or all(d == 0 or d >= max(held) for d in dropped)
    assert all(d == 0 for d in dropped) or not any(df[term] == 0 for term in kept)
