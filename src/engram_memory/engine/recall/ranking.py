"""Lexical relevance (BM25F over a memory's weighted fields) blended with recency, as pure arithmetic.

Kept free of I/O so every score is reproducible from its inputs and the constants named in FORMULA_REF.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from engram_memory.engine.ports.lexical import FIELD_WEIGHTS, FIELDS, IMPACT_SCALE, K1, B, idf, term_impacts

__all__ = [
    "DATE_BOOST",
    "FIELDS",
    "FIELD_WEIGHTS",
    "FORMULA_REF",
    "FREQUENT_MIN_DOCS",
    "FREQUENT_SHARE",
    "FULL_MATCH_SHARE",
    "IMPACT_SCALE",
    "K1",
    "LEXICAL_SUBJECT_BOOST",
    "MAX_QUERY_TERMS",
    "MAX_RANKED_TERMS",
    "RECENCY_HALF_LIFE_MS",
    "RECENCY_WEIGHT",
    "SEMANTIC_SHARE",
    "SUBJECT_BOOST",
    "B",
    "CorpusStats",
    "Document",
    "Scored",
    "blend",
    "bm25f",
    "formula_number",
    "frequent_terms",
    "full_match",
    "fuse",
    "hybrid_formula",
    "idf",
    "lexical_formula",
    "rank",
    "rarest_terms",
    "recency",
    "term_impacts",
]

RECENCY_HALF_LIFE_MS = 30 * 24 * 3600 * 1000
RECENCY_WEIGHT = 0.1

# The hybrid profile's fusion (decision 0025): a weighted sum of the model's cosine and the lexical score
# scaled to [0, 1], SEMANTIC_SHARE of the first. The lexical score is divided by the best one of the search,
# unless that one matches less than FULL_MATCH_SHARE of what the query's terms could give (the sum of their
# idf): a weak best match (a Korean question sharing one name with an English note) is not made a full one.
# Measured on the LoCoMo, multilingual and cross-language dev sets.
SEMANTIC_SHARE = 0.6
FULL_MATCH_SHARE = 0.3
# A memory whose subject (first primary token) the query names gets its fused score times 1 + this.
SUBJECT_BOOST = 0.3
# A memory whose event time falls on a date the query names (engine/recall/timeref.py); tuned on the LoCoMo dev set.
DATE_BOOST = 1.0
LEXICAL_SUBJECT_BOOST = 1.0  # the same boost when the lexical channel ranks alone
# A query term in at least this share of the scope's memories (given enough of them) is "frequent".
FREQUENT_SHARE = 0.3
FREQUENT_MIN_DOCS = 20
# A query is a question, not a document: of a longer one, the first MAX_QUERY_TERMS distinct terms are
# read, and the MAX_RANKED_TERMS rarest of them in the scope rank (8 KiB of Chinese is 5,000 terms; a
# question, 20 to 80). The bound keeps a pasted page from costing thousands of postings lists.
MAX_QUERY_TERMS = 1024
MAX_RANKED_TERMS = 256

_MS_PER_DAY = 24 * 3600 * 1000
_SCORE_DECIMALS = 9


def formula_number(value: float) -> str:
    """A constant as the receipts' formulas write it."""
    return f"{value:g}"


FORMULA_REF: str = (
    f"bm25f(k1={formula_number(K1)},b={formula_number(B)},"
    + ",".join(f"{name}={formula_number(FIELD_WEIGHTS[name])}" for name in FIELDS)
    + f")*({formula_number(1 - RECENCY_WEIGHT)}+{formula_number(RECENCY_WEIGHT)}"
    + f"*recency(half_life={formula_number(RECENCY_HALF_LIFE_MS / _MS_PER_DAY)}d))"
)


@dataclass(frozen=True, slots=True)
class CorpusStats:
    """The scope-wide numbers BM25 needs, computed by the caller over exactly the documents searched."""

    doc_count: int
    avg_field_len: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Document:
    """A candidate reduced to what scoring reads: its id and its tokens per field."""

    doc_id: str
    fields: Mapping[str, Sequence[str]]


@dataclass(frozen=True, slots=True)
class Scored:
    """A ranked result; the score is rounded to 9 decimals so float noise below that cannot reorder ties."""

    doc_id: str
    score: float


# Query terms up to which each is counted in a field on its own, instead of the field's Counter (_score).
COUNT_EACH_UP_TO = 6


def _unique(terms: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(terms))


def _score(terms: Sequence[str], idfs: Sequence[float], doc: Document, stats: CorpusStats) -> float:
    """Shared by bm25f and rank so a ranked score is exactly the documented one; idf comes precomputed."""
    # A short query's terms are counted one by one (list.count runs in C, and a handful of counts cost
    # less than a Counter of the field); a long query counts each field once: counting per term made a
    # long query over long fields cost terms x tokens, the bulk of a CJK search whose bigrams make both long.
    each = len(terms) <= COUNT_EACH_UP_TO
    norms: list[tuple[float, float, Callable[[str], int | None]]] = []
    for name in FIELDS:
        tokens = doc.fields.get(name, ())
        if not tokens:
            continue
        avg_len = stats.avg_field_len.get(name, 0.0)
        norm = 1.0 - B + B * len(tokens) / avg_len if avg_len > 0 else 1.0 - B + B
        norms.append((FIELD_WEIGHTS[name], norm, tokens.count if each else Counter(tokens).get))
    score = 0.0
    for term, term_idf in zip(terms, idfs, strict=True):
        tf = 0.0
        for weight, norm, count_of in norms:
            count = count_of(term)
            if count:
                tf += weight * count / norm
        if tf > 0.0:
            score += term_idf * tf / (K1 + tf)
    return score


def _idfs(terms: Sequence[str], df: Mapping[str, int], doc_count: int) -> list[float]:
    # A term is only scored where a document contains it, so its df is at least 1 even if the caller's
    # statistics lag behind; that keeps idf finite and consistent with what was observed.
    return [idf(max(df.get(term, 0), 1), doc_count) for term in terms]


def bm25f(terms: Sequence[str], doc: Document, df: Mapping[str, int], stats: CorpusStats) -> float:
    """Simple BM25F: weights apply before saturation, so a term repeated across fields still saturates."""
    unique = _unique(terms)
    return _score(unique, _idfs(unique, df, stats.doc_count), doc, stats)


def recency(age_ms: int, half_life_ms: int = RECENCY_HALF_LIFE_MS) -> float:
    """Older memories fade smoothly rather than falling off a cliff; future timestamps count as brand new."""
    if half_life_ms <= 0:
        raise ValueError(f"half_life_ms must be positive, got {half_life_ms}")
    return math.pow(0.5, max(age_ms, 0) / half_life_ms)


def blend(relevance: float, recency_value: float, weight: float = RECENCY_WEIGHT) -> float:
    """Recency discounts relevance by at most ``weight``: it reorders near-ties but never invents a match."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be within [0, 1], got {weight}")
    return relevance * ((1.0 - weight) + weight * recency_value)


def rank(
    terms: Sequence[str],
    docs: Sequence[Document],
    df: Mapping[str, int],
    stats: CorpusStats,
    *,
    ages_ms: Mapping[str, int],
) -> list[Scored]:
    """One deterministic total order (score, then id) so identical searches page identically."""
    unique = _unique(terms)
    idfs = _idfs(unique, df, stats.doc_count)
    scored: list[Scored] = []
    for doc in docs:
        relevance = _score(unique, idfs, doc, stats)
        if relevance == 0.0:
            continue
        value = round(blend(relevance, recency(ages_ms[doc.doc_id])), _SCORE_DECIMALS)
        scored.append(Scored(doc.doc_id, value))
    scored.sort(key=lambda s: (-s.score, s.doc_id))
    return scored


def fuse(lexical: Sequence[Scored], semantic: Sequence[tuple[str, float]], *, full_match: float) -> dict[str, float]:
    """SEMANTIC_SHARE * cosine + (1 - SEMANTIC_SHARE) * lexical score / max(best lexical score, FULL_MATCH_SHARE
    * `full_match`), for every record either channel returned (a channel that did not return it gives 0).

    Scores, not ranks: a record a model finds far closer than anything else (a memory that says in Korean
    what an English question asks) keeps that lead, where rank fusion gave it no more than the lexical
    channel's best guess in the query's own language. `full_match` is the sum of the query terms' idf,
    what a memory holding every term would approach.
    """
    best = max((scored.score for scored in lexical), default=0.0)
    scale = max(best, FULL_MATCH_SHARE * full_match)
    fused = {record_id: SEMANTIC_SHARE * cosine for record_id, cosine in semantic}
    for scored in lexical:
        share = scored.score / scale if scale > 0 else 0.0
        fused[scored.doc_id] = fused.get(scored.doc_id, 0.0) + (1.0 - SEMANTIC_SHARE) * share
    return fused


def full_match(terms: Sequence[str], df: Mapping[str, int], doc_count: int) -> float:
    """The sum of the terms' idf (fuse's yardstick for a lexical match)."""
    return sum(_idfs(_unique(terms), df, doc_count))


def frequent_terms(terms: Sequence[str], df: Mapping[str, int], doc_count: int) -> frozenset[str]:
    """Query terms so common in the scope that they cannot tell its memories apart (none in a small scope)."""
    if doc_count < FREQUENT_MIN_DOCS:
        return frozenset()
    return frozenset(term for term in terms if df.get(term, 0) >= FREQUENT_SHARE * doc_count)


def rarest_terms(terms: Sequence[str], df: Mapping[str, int]) -> list[str]:
    """At most MAX_RANKED_TERMS of the terms, in query order: the rarest the scope holds first (a term
    no memory holds adds nothing to any score), ties by position."""
    if len(terms) <= MAX_RANKED_TERMS:
        return list(terms)

    def rarity(position: int) -> tuple[bool, int, int]:
        docs = df.get(terms[position], 0)
        return (docs == 0, docs, position)

    kept = sorted(sorted(range(len(terms)), key=rarity)[:MAX_RANKED_TERMS])
    return [terms[position] for position in kept]


def _frequent() -> str:
    # The query-term caps (MAX_QUERY_TERMS, MAX_RANKED_TERMS) are not written here: every receipt paid
    # 12 tokens for two constants that docs/tools.md states and profile_version pins (decision 0023).
    return f"[frequent>={formula_number(FREQUENT_SHARE)}*docs>={FREQUENT_MIN_DOCS}]"


def lexical_formula() -> str:
    """The lexical profile's formula: BM25F over the telling terms, the subject and date boosts, recency."""
    bm25f_term, recency_term = FORMULA_REF.split(")*(", 1)
    return (
        f"{bm25f_term}){_frequent()}*subject(1+{formula_number(LEXICAL_SUBJECT_BOOST)})*date(1+{formula_number(DATE_BOOST)})"
        f"*({recency_term}"
    )


def hybrid_formula(cosine: str) -> str:
    """The hybrid profile's formula: the fusion of the model's cosine (as semantic_models.cosine_formula
    writes it) and the lexical score, the subject and date boosts, recency."""
    bm25f_term, recency_term = FORMULA_REF.split(")*(", 1)
    return (
        f"fuse({formula_number(SEMANTIC_SHARE)}*{cosine};"
        f"{formula_number(1 - SEMANTIC_SHARE)}*{bm25f_term}){_frequent()}"
        f"/max(top,{formula_number(FULL_MATCH_SHARE)}*sum(idf)))"
        f"*subject(1+{formula_number(SUBJECT_BOOST)})*date(1+{formula_number(DATE_BOOST)})*({recency_term}"
    )
