"""What both stores' impact-ordered postings share: which terms get postings, how deep a term is read,
and the rows a memory's fields give.

Each posting is (scope, term, impact, record rowid), kept in impact order beside the full-text index.
A search reads at most TERM_DEPTH postings per query term, best first, so its cost no longer grows with
how many memories hold the term; the engine re-scores the pool with exact BM25F.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from engram_memory.engine.ports.lexical import IMPACT_SCALE, idf, term_impacts
from engram_memory.engine.recall.text import STOP_WORDS, stem

# Postings read per query term: a term held by fewer memories is read whole.
TERM_DEPTH = 5000
# Stop words are two fifths of a memory's distinct tokens and almost never query terms (the engine
# drops them from any query that has another word), so they are counted but get no postings.
UNPOSTED: frozenset[str] = frozenset(stem(word) for word in STOP_WORDS)


def posted(terms: Sequence[str]) -> list[str]:
    """The terms that have postings. A stop word among other words only adds to the scores of what they
    find (its idf is low by nature); a query of stop words alone goes to the full-text index."""
    return [term for term in terms if term not in UNPOSTED]


def weighted_terms(counts: Mapping[str, int], doc_count: int) -> list[tuple[str, float]]:
    """Each term some memory holds, with the factor that turns its postings' integer impacts into shares
    of BM25F: its idf in the scope, over the impact scale."""
    return [(term, idf(docs, doc_count) / IMPACT_SCALE) for term, docs in counts.items() if docs]


def impacts_of(fields: Mapping[str, str]) -> tuple[dict[str, int], list[tuple[str, int]]]:
    """(every distinct term's impact, the (term, negated impact) of the posted ones, sorted)."""
    impacts = term_impacts(fields)
    return impacts, sorted((term, -impact) for term, impact in impacts.items() if term not in UNPOSTED)
