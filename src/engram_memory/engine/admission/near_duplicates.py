"""Near-duplicates go to a person, never silently away (the policy's `[near_duplicates]`, issue 20).

With `action = "review"`, a would-be acceptance whose primary text is near-identical to the primary text of
a current record of its scope waits for a person (`pending_adjudication`, reason `near_duplicate`), who
sees the match beside it. Near-identical: the Jaccard similarity of the two texts' token sets (the index's
own tokens: folded, stemmed, CJK bigrams) is at least `threshold`, and the candidate's text has at least
`min_terms` distinct tokens (below that, "Thanks!" would match every "Thanks!"). The records compared
are the best lexical matches of the candidate's rarest terms, found through the index. Nothing is ever
dropped: the rule only sends to review, and the default is `accept`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engram_memory.contract.payloads import primary_text
from engram_memory.engine.admission.policy import AdmissionPolicy
from engram_memory.engine.ports.store import Scope, StoreTx
from engram_memory.engine.recall.ranking import rarest_terms
from engram_memory.engine.recall.text import tokenize

COMPARED = 20  # best lexical matches compared
PROBE_TERMS = 64  # rarest terms of the candidate the lookup uses


@dataclass(frozen=True, slots=True)
class NearMatch:
    record_id: str
    similarity: float


def jaccard(left: set[str], right: set[str]) -> float:
    union = left | right
    return len(left & right) / len(union) if union else 0.0


def near_matches(
    tx: StoreTx, scope: Scope, policy: AdmissionPolicy, payload: Mapping[str, Any], now_ms: int
) -> list[NearMatch]:
    """Current records of the scope whose primary text is near-identical to the payload's, best first."""
    rule = policy.near_duplicates
    tokens = list(dict.fromkeys(tokenize(primary_text(payload))))
    if len(tokens) < rule.min_terms:
        return []
    terms = rarest_terms(tokens, tx.term_doc_counts(scope, tokens))[:PROBE_TERMS]
    mine = set(tokens)
    found = [
        NearMatch(doc.record_id, round(jaccard(mine, set(doc.fields.get("primary", "").split())), 4))
        for doc in tx.lexical_candidates(scope, terms, valid_at_ms=now_ms, limit=COMPARED)
    ]
    return sorted((m for m in found if m.similarity >= rule.threshold), key=lambda m: (-m.similarity, m.record_id))


def is_near_duplicate(
    tx: StoreTx,
    scope: Scope,
    policy: AdmissionPolicy,
    payload: Mapping[str, Any],
    now_ms: int,
    superseding: tuple[str, ...] = (),
) -> bool:
    """Whether the rule sends the candidate to a person; a record its family supersedes is no match (a new
    value of a fact is expected to read like the old one)."""
    if policy.near_duplicates.action != "review":
        return False
    return any(m.record_id not in superseding for m in near_matches(tx, scope, policy, payload, now_ms))
