"""The lexical index's layout, which the engine ranks by and the stores keep: its fields, their weights,
and the integer impact of each of a memory's terms that orders a term's postings.

A port, not ranking: a store builds its columns, its full-text weights and its postings from these, and
the engine's BM25F (engine/recall/ranking.py) scores with the same numbers, so both sides import them
from here and neither from the other.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["FIELDS", "FIELD_WEIGHTS", "IMPACT_SCALE", "K1", "B", "idf", "term_impacts"]

FIELDS: tuple[str, ...] = ("primary", "decision", "evidence", "context", "citations")
# What a memory asserts outweighs why, which outweighs its surroundings and its references.
FIELD_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"primary": 3.0, "decision": 2.0, "evidence": 1.5, "context": 1.0, "citations": 0.5}
)
K1 = 1.2
B = 0.75


def idf(df: int, doc_count: int) -> float:
    """Rare terms say more; the +1 form keeps very common terms at a small positive weight, never negative."""
    n = max(doc_count, 0)
    df = min(max(df, 0), n)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


# Impacts order a term's postings for candidate generation (stores may keep them). They must be a pure
# function of one memory's fields, so a posting can be found again to delete it: lengths are normalised
# against fixed reference lengths (in tokens) rather than the scope's averages, which drift.
IMPACT_SCALE = 1_000_000
_REFERENCE_LEN: Mapping[str, float] = MappingProxyType(
    {"primary": 24.0, "decision": 12.0, "evidence": 24.0, "context": 48.0, "citations": 4.0}
)


def term_impacts(fields: Mapping[str, str]) -> dict[str, int]:
    """Each distinct token's saturated, field-weighted frequency in this memory, scaled to an integer:
    the share of a term's idf the memory would earn under BM25F at reference lengths."""
    weighted: dict[str, float] = {}
    for name in FIELDS:
        tokens = fields.get(name, "").split()
        if not tokens:
            continue
        share = FIELD_WEIGHTS[name] / (1.0 - B + B * len(tokens) / _REFERENCE_LEN[name])
        for token in tokens:
            weighted[token] = weighted.get(token, 0.0) + share
    return {token: max(1, round(IMPACT_SCALE * tf / (K1 + tf))) for token, tf in weighted.items()}
