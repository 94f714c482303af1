"""Relevance, not just rank: which of a search's candidates are worth the agent's context at all.

An empty list must mean "nothing relevant" (decision 0029). Two tests, both calibrated on the dev sets
(docs/benchmarks.md, "Relevance"):

* each record must match the query: the query's telling terms it holds (frequent ones are not searched
  while others are left) weigh at least `lexical` of their idf sum (its lexical share; what it holds,
  not how BM25F scores it, so the share does not move with the scope's length statistics), or its
  cosine to the query reaches the model's `cosine` floor;
* the search must have found something clearly about the query, or the query must name what the scope is
  about: a frequent term of the scope (in a large share of its memories) that is also what some
  candidates are about (their subject: a person, the team's product). A clear match is a record that
  holds every telling term of the query; or one whose cosine plus `weight` times its lexical share
  reaches `clear`; or one the model places
  `lead` ahead of its fifth nearest; or one of the three nearest, written in another script than the
  query (its primary text is), whose cosine reaches `cross`. A question in another language than its
  answer shares no term with it and gets a lower cosine, so it needs these last two. Without any, weak
  matches are noise (ten loosely related notes for a question the workspace cannot answer) and the
  answer is empty.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from engram_memory.engine.ports.store import IndexedDoc
from engram_memory.engine.recall.languages import (
    CHINESE,
    ENGLISH,
    JAPANESE,
    KOREAN,
    TRADITIONAL_CHINESE,
    language_of,
)
from engram_memory.engine.recall.ranking import formula_number, idf


@dataclass(frozen=True, slots=True)
class Floors:
    lexical: float  # the lexical share a record must hold
    cosine: float | None  # a neighbour's cosine floor; None without a model
    clear: float  # what the best matching record's cosine + weight * lexical share must reach
    weight: float = 1.0
    lead: float | None = None  # how far the nearest cosine must stand ahead of the LEAD_RANK-th
    cross: float | None = None  # the cosine a record in another script than the query needs to be clear


# A lexical share this close to 1 is a record holding every telling term of the query (float sums).
WHOLE_QUERY = 0.999
# The neighbour the nearest one's lead is measured against (0-based: the fifth nearest).
LEAD_RANK = 4


# The lexical profile (no model): a record holding 0.05 of the query's telling idf counts, and a search
# answers when one holds 0.22 (calibrated as the model's floors, docs/benchmarks.md "Relevance").
LEXICAL_FLOORS: Floors | None = Floors(lexical=0.05, cosine=None, clear=0.22, weight=1.0)


def lexical_shares(
    terms: Sequence[str], df: Mapping[str, int], doc_count: int, docs: Sequence[IndexedDoc]
) -> dict[str, float]:
    """Each document's lexical share: the idf of the query terms it holds over the idf of them all."""
    unique = list(dict.fromkeys(terms))
    weights = {term: idf(max(df.get(term, 0), 1), doc_count) for term in unique}
    total = sum(weights.values())
    if total <= 0:
        return {}
    shares = {}
    for doc in docs:
        held = {token for text in doc.fields.values() for token in text.split()}
        shares[doc.record_id] = sum(weight for term, weight in weights.items() if term in held) / total
    return shares


def relevant_ids(
    shares: Mapping[str, float],
    cosines: Sequence[tuple[str, float]],
    floors: Floors | None,
    *,
    names_scope: bool,
    crosses: Callable[[str], bool] | None = None,
) -> set[str] | None:
    """The records to return; None when every candidate is (no calibrated floors: as before floors).
    `shares` are the lexical candidates' lexical shares; `names_scope`, whether the query names what the
    scope is about; `crosses`, whether a record is written in another script than the query (asked only
    of the few nearest, and only when nothing else made the answer clear: it may read the record)."""
    if floors is None:
        return None
    near = dict(cosines)
    kept = {doc_id for doc_id, share in shares.items() if share >= floors.lexical}
    if floors.cosine is not None:
        kept.update(doc_id for doc_id, cosine in near.items() if cosine >= floors.cosine)
    if names_scope:
        return kept
    clear = any(
        shares.get(doc_id, 0.0) >= WHOLE_QUERY
        or near.get(doc_id, 0.0) + floors.weight * shares.get(doc_id, 0.0) >= floors.clear
        for doc_id in kept
    )
    if clear or _leads(near, floors.lead) or _across(near, floors.cross, crosses):
        return kept
    return set()


# How many of the nearest records the cross-script test reads, at most.
CROSS_LOOKS = 3


def _across(near: Mapping[str, float], cross: float | None, crosses: Callable[[str], bool] | None) -> bool:
    if cross is None or crosses is None:
        return False
    nearest = sorted((item for item in near.items() if item[1] >= cross), key=lambda item: (-item[1], item[0]))
    return any(crosses(doc_id) for doc_id, _ in nearest[:CROSS_LOOKS])


_SCRIPTS = MappingProxyType(
    {ENGLISH: "latin", KOREAN: "hangul", CHINESE: "han", TRADITIONAL_CHINESE: "han", JAPANESE: "han"}
)


def script_of(text: str) -> str:
    """Latin, Hangul, or Han (with kana): what decides whether two texts can share a term at all."""
    language = language_of(text)
    return _SCRIPTS.get(language, language)


def _leads(near: dict[str, float], lead: float | None) -> bool:
    if lead is None or not near:
        return False
    cosines = sorted(near.values(), reverse=True)
    return cosines[0] - (cosines[LEAD_RANK] if len(cosines) > LEAD_RANK else 0.0) >= lead


def relevance_formula(floors: Floors | None) -> str:
    """How relevance was decided, for the rank receipt's formula_ref."""
    if floors is None:
        return ""
    cosine = "" if floors.cosine is None else f"|cos>={formula_number(floors.cosine)}"
    clear = f"cos+{formula_number(floors.weight)}*lex" if floors.cosine is not None else "lex"
    lead = "" if floors.lead is None else f"|cos1-cos{LEAD_RANK + 1}>={formula_number(floors.lead)}"
    lead += "" if floors.cross is None else f"|other_script:cos>={formula_number(floors.cross)}"
    return (
        f"[relevant:lex>={formula_number(floors.lexical)}{cosine};"
        f"answer:frequent|lex=1|{clear}>={formula_number(floors.clear)}{lead}]"
    )
