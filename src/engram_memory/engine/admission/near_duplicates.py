"""Near-duplicates go to a person, never silently away (the policy's `[near_duplicates]`, issue 20).

With `action = "review"`, a would-be acceptance whose text is near-identical to a current record of its
scope waits for a person (`pending_adjudication`, reason `near_duplicate`), who sees the match beside it.
The records compared are the best lexical matches of the candidate's rarest terms (found through the
index). Near-identical, by either measure:

* lexical: the Jaccard similarity of the two primary texts' token sets (the index's own tokens: folded,
  stemmed, CJK bigrams) is at least `threshold`, and the candidate has at least `min_terms` distinct
  tokens (below that, "Thanks!" would match every "Thanks!");
* semantic, when an embedding model is installed: the cosine of the two memories' embeddings (each made
  as the semantic channel makes a record's: primary text and context, centred on its language) is at
  least `semantic_threshold`, under the same `min_terms` floor. A compared record with no vector yet (the
  indexer writes them beside admissions) is embedded now, so the answer never depends on timing.

Nothing is ever dropped: the rule only sends to review, and the default is `accept`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from engram_memory.contract.errors import ContractError
from engram_memory.contract.payloads import primary_text
from engram_memory.engine.admission.policy import AdmissionPolicy
from engram_memory.engine.ports.agent_tx import LexicalIndexTx, VectorsTx
from engram_memory.engine.ports.store import IndexedDoc, Scope
from engram_memory.engine.recall.ranking import rarest_terms
from engram_memory.engine.recall.semantic import VectorCache, embed_record, from_bytes
from engram_memory.engine.recall.text import tokenize

COMPARED = 20  # best lexical matches compared
PROBE_TERMS = 64  # rarest terms of the candidate the lookup uses

PayloadOf = Callable[[str], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class NearMatch:
    record_id: str
    similarity: float  # lexical (Jaccard)
    semantic: float | None = None  # cosine, when a model compared them


def jaccard(left: set[str], right: set[str]) -> float:
    union = left | right
    return len(left & right) / len(union) if union else 0.0


class NearMatchTx(LexicalIndexTx, VectorsTx, Protocol):
    """What finding a near duplicate reads: the lexical index's best matches and their embeddings."""


def _cosines(
    cache: VectorCache,
    tx: VectorsTx,
    scope: Scope,
    payload: Mapping[str, Any],
    docs: list[IndexedDoc],
    payload_of: PayloadOf,
) -> dict[str, float]:
    mine = embed_record(cache, scope, "candidate", payload).vector
    stored = tx.vectors_of(scope, cache.vector_id, [doc.record_id for doc in docs])
    cosines: dict[str, float] = {}
    for doc in docs:
        if doc.record_id in stored:
            theirs = from_bytes(stored[doc.record_id], cache.model.embedder.dimension)
        else:
            try:
                other = payload_of(doc.record_id)
            except ContractError:  # a body that no longer opens is compared lexically only
                continue
            theirs = embed_record(cache, scope, doc.record_id, other).vector
        cosines[doc.record_id] = round(float(np.dot(theirs, mine)), 4)
    return cosines


def best_lexical_matches(tx: LexicalIndexTx, scope: Scope, tokens: list[str], now_ms: int) -> list[IndexedDoc]:
    """The current records of the scope the index ranks best for a text's rarest tokens: what a new
    memory is compared with (here, and for the same text in same_text.py)."""
    terms = rarest_terms(tokens, tx.term_doc_counts(scope, tokens))[:PROBE_TERMS]
    return tx.lexical_candidates(scope, terms, valid_at_ms=now_ms, limit=COMPARED)


def near_matches(
    tx: NearMatchTx,
    scope: Scope,
    policy: AdmissionPolicy,
    payload: Mapping[str, Any],
    now_ms: int,
    *,
    semantic: VectorCache | None = None,
    payload_of: PayloadOf | None = None,
) -> list[NearMatch]:
    """Current records of the scope near-identical to the payload by either measure, best first."""
    rule = policy.near_duplicates
    tokens = list(dict.fromkeys(tokenize(primary_text(payload))))
    if len(tokens) < rule.min_terms:
        return []
    docs = best_lexical_matches(tx, scope, tokens, now_ms)
    if not docs:
        return []
    cosines = _cosines(semantic, tx, scope, payload, docs, payload_of) if semantic and payload_of else {}
    mine = set(tokens)
    found = [
        NearMatch(
            doc.record_id,
            round(jaccard(mine, set(doc.fields.get("primary", "").split())), 4),
            cosines.get(doc.record_id),
        )
        for doc in docs
    ]
    near = [
        m
        for m in found
        if m.similarity >= rule.threshold or (m.semantic is not None and m.semantic >= rule.semantic_threshold)
    ]
    return sorted(near, key=lambda m: (-m.similarity, -(m.semantic or 0.0), m.record_id))


def is_near_duplicate(
    tx: NearMatchTx,
    scope: Scope,
    policy: AdmissionPolicy,
    payload: Mapping[str, Any],
    now_ms: int,
    superseding: tuple[str, ...] = (),
    *,
    semantic: VectorCache | None = None,
    payload_of: PayloadOf | None = None,
) -> bool:
    """Whether the rule sends the candidate to a person; a record its family supersedes is no match (a new
    value of a fact is expected to read like the old one)."""
    if policy.near_duplicates.action != "review":
        return False
    found = near_matches(tx, scope, policy, payload, now_ms, semantic=semantic, payload_of=payload_of)
    return any(m.record_id not in superseding for m in found)
