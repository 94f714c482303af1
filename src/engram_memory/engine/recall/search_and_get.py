"""Search and get: only accepted_current records of the bound scope, with receipts.

A ranking is a pure function of the pinned state (the scope's records cursor and the valid-time
as-of), so page two recomputes page one's order exactly; a cursor from any other state is STALE_PAGE.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engram_memory.contract.arguments import GetArguments, SearchArguments
from engram_memory.contract.canonical import (
    PACKET_DOMAIN,
    RANK_ORDER_DOMAIN,
    RANK_REQUEST_DOMAIN,
    READ_RECEIPT_DOMAIN,
    RESPONSE_DOMAIN,
    REVALIDATION_DOMAIN,
    canonical_json,
    digest,
)
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.instants import format_instant
from engram_memory.contract.payloads import primary_text
from engram_memory.contract.states import RecordState
from engram_memory.contract.tools import Tool
from engram_memory.engine import journal
from engram_memory.engine.calls import Call
from engram_memory.engine.deps import Deps
from engram_memory.engine.ports.agent_tx import BodiesTx, JournalTx, LexicalIndexTx, RecordsTx, VectorsTx
from engram_memory.engine.ports.store import IndexedDoc, RecordRow, ScopeHead
from engram_memory.engine.recall.cursors import PagePin, mint_cursor, open_cursor
from engram_memory.engine.recall.packets import page_packets, redacted_view
from engram_memory.engine.recall.ranking import (
    DATE_BOOST,
    FIELDS,
    LEXICAL_SUBJECT_BOOST,
    MAX_QUERY_TERMS,
    SUBJECT_BOOST,
    CorpusStats,
    Document,
    Scored,
    blend,
    frequent_terms,
    full_match,
    fuse,
    hybrid_formula,
    lexical_formula,
    rank,
    rarest_terms,
    recency,
)
from engram_memory.engine.recall.reading import read_scope
from engram_memory.engine.recall.reindex import is_stale
from engram_memory.engine.recall.relevance import (
    LEXICAL_FLOORS,
    lexical_shares,
    relevance_formula,
    relevant_ids,
    script_of,
)
from engram_memory.engine.recall.semantic import (
    SEMANTIC_POOL,
    Embedded,
    VectorCache,
    semantic_query,
    to_bytes,
)
from engram_memory.engine.recall.semantic_models import SemanticModel, cosine_formula
from engram_memory.engine.recall.text import query_terms, subject, tokenizer_id
from engram_memory.engine.recall.timeref import DateWindow, named_windows, without_dates
from engram_memory.engine.receipts import authorization_receipt_digest
from engram_memory.engine.sealing.bodies import read_payload

PROFILE = "lexical-bm25f"
# 2: the date boost; 3: CJK bigrams and Traditional/Simplified folding (engine/recall/text.py); 4: only relevant
# records (engine/recall/relevance.py)
PROFILE_VERSION = 4
HYBRID_PROFILE = "hybrid-convex"
# 2: the date boost, context lines embedded one by one; 3: as lexical 3; 4: Latin-alphabet texts embedded by
# the English model, all others by the multilingual one; 5: one model for every text, its vectors taken from
# their language's centroid, fused by score (engine/recall/semantic_models.py, ranking.fuse); 6: only relevant
# records (engine/recall/relevance.py)
HYBRID_PROFILE_VERSION = 6
# The index's best 100 (by impact-ordered postings on SQLite, weighted full-text rank on PostgreSQL) are
# re-scored with BM25F: on the LoCoMo dev set the top 10 are the same as from 1,000 (docs/benchmarks.md).
CANDIDATE_POOL = 100


def eligible(record: RecordRow, valid_at_ms: int) -> bool:
    """Current, valid at `valid_at_ms` (inside [t, t_end]), and not past its retention expiry."""
    return (
        record.state == RecordState.ACCEPTED_CURRENT.value
        and record.valid_from_ms <= valid_at_ms
        and (record.valid_to_ms is None or valid_at_ms <= record.valid_to_ms)
        and (record.expires_at_ms is None or record.expires_at_ms > valid_at_ms)
    )


class RecallTx(JournalTx, RecordsTx, BodiesTx, LexicalIndexTx, VectorsTx, Protocol):
    """What a search or a get reads: never a candidate, a confirmation or anything the host keeps."""


def _rank(
    tx: LexicalIndexTx,
    call: Call,
    terms: Sequence[str],
    valid_at_ms: int,
    *,
    with_recency: bool = True,
    df: Mapping[str, int] | None = None,
) -> tuple[list[Scored], list[IndexedDoc]]:
    """The lexical order and the candidates the index gave for it; `df` when the caller has it already."""
    docs = tx.lexical_candidates(call.scope, terms, valid_at_ms=valid_at_ms, limit=CANDIDATE_POOL)
    if not docs:
        return [], []
    stats = tx.index_stats(call.scope)
    count = max(stats.doc_count, 1)
    corpus = CorpusStats(
        doc_count=stats.doc_count,
        avg_field_len={name: stats.field_token_totals.get(name, 0) / count for name in FIELDS},
    )
    documents = [Document(doc_id=doc.record_id, fields={n: doc.fields[n].split() for n in FIELDS}) for doc in docs]
    ages = {doc.record_id: 0 if not with_recency else valid_at_ms - doc.valid_from_ms for doc in docs}
    counts = df if df is not None and all(term in df for term in terms) else tx.term_doc_counts(call.scope, terms)
    ranked = rank(terms, documents, counts, corpus, ages_ms=ages)
    return ranked, docs


@dataclass(frozen=True, slots=True)
class _Ranking:
    """One search's full order and what each channel contributed, for the receipt."""

    ranked: list[Scored]
    channels: list[dict[str, Any]]
    embedded: list[Embedded] = field(default_factory=list)  # vectors the search had to compute (to keep)


def _lexical_receipt(deps: Deps, terms: Sequence[str], pooled: int) -> dict[str, Any]:
    return {
        "channel": "lexical",
        "index": deps.store.index_name,
        "tokenizer": tokenizer_id(),
        "query_terms": len(terms),
        "pooled": pooled,
    }


@dataclass(frozen=True, slots=True)
class _Focus:
    terms: list[str]
    lexical_terms: list[str]
    frequent: frozenset[str]
    doc_count: int
    df: dict[str, int]  # documents of the scope holding each term


def _focus(tx: LexicalIndexTx, call: Call, query: str) -> _Focus:
    """The query's terms, the terms that rank lexically, the frequent ones (see _hybrid), and how many
    memories the scope has."""
    terms = query_terms(query)[:MAX_QUERY_TERMS]
    stats = tx.index_stats(call.scope)
    if is_stale(stats):
        # Entries built by another tokenizer would meet these terms on the wrong tokens: never answer
        # from them (engine/recall/reindex.py moves the scope; serve runs it before it serves).
        raise ContractError(ErrorCode.PROJECTION_STALE)
    doc_count = stats.doc_count
    df = tx.term_doc_counts(call.scope, terms)
    frequent = frequent_terms(terms, df, doc_count)
    lexical_terms = rarest_terms([term for term in terms if term not in frequent] or terms, df)
    return _Focus(terms, lexical_terms, frequent, doc_count, df)


def _telling(lexical_terms: Sequence[str], query: str) -> list[str]:
    """The lexical terms a memory's text can hold: the dates a query names are matched against the
    memories' event times (timeref), not their words, so they weigh nothing in a lexical share."""
    undated = set(query_terms(without_dates(query)))
    return [term for term in lexical_terms if term in undated] or list(lexical_terms)


def _subject_boosted(scored: float, subject: str, terms: Sequence[str], boost: float) -> float:
    return scored * (1.0 + boost) if subject and subject in terms else scored


def _date_boosted(scored: float, at_ms: int, windows: Sequence[DateWindow]) -> float:
    """Memories whose event time falls on a date the query names (see timeref)."""
    return scored * (1.0 + DATE_BOOST) if any(window.holds(at_ms) for window in windows) else scored


def _lexical(deps: Deps, tx: LexicalIndexTx, call: Call, query: str, valid_at_ms: int, generation: int) -> _Ranking:
    """BM25F over the query's telling terms, the subject boost, then recency (as in _hybrid, without a model)."""
    focus = _focus(tx, call, query)
    terms, lexical_terms = focus.terms, focus.lexical_terms
    relevance, docs = _rank(tx, call, lexical_terms, valid_at_ms, with_recency=False, df=focus.df)
    subjects = {doc.record_id: subject(doc.fields["primary"].split()) for doc in docs}
    at = {doc.record_id: doc.valid_from_ms for doc in docs}
    windows = named_windows(query)
    shares = lexical_shares(_telling(lexical_terms, query), focus.df, focus.doc_count, docs)
    names_scope = not focus.frequent.isdisjoint(subjects.values())
    relevant = relevant_ids(shares, [], LEXICAL_FLOORS, names_scope=names_scope)
    ranked = []
    for s in relevance:
        if relevant is not None and s.doc_id not in relevant:
            continue
        boosted = _date_boosted(
            _subject_boosted(s.score, subjects[s.doc_id], terms, LEXICAL_SUBJECT_BOOST), at[s.doc_id], windows
        )
        ranked.append(Scored(s.doc_id, round(blend(boosted, recency(valid_at_ms - at[s.doc_id])), 9)))
    ranked.sort(key=lambda s: (-s.score, s.doc_id))
    return _Ranking(ranked, [_lexical_receipt(deps, lexical_terms, len(docs))])


def _hybrid(
    deps: Deps, cache: VectorCache, tx: RecallTx, call: Call, query: str, valid_at_ms: int, generation: int
) -> _Ranking:
    """The fusion of the lexical scores (relevance alone) and the model's cosines to the query (ranking.fuse),
    a subject boost, then recency.

    Terms found in a large share of the scope's memories (a speaker's name in a conversation, the team's
    own name in its notes) say little about which memory is meant: they are left out of the lexical
    terms (unless nothing else is left) and of the text the model embeds, and serve instead to boost the
    memories whose subject they are.
    """
    focus = _focus(tx, call, query)
    terms, lexical_terms, frequent = focus.terms, focus.lexical_terms, focus.frequent

    def payload_of(record_id: str) -> dict[str, Any]:
        return read_payload(deps, tx, call.scope, record_id, "record")

    semantic = cache.start(
        tx,
        call.scope,
        generation,
        payload_of,
        semantic_query(without_dates(query), frequent),
        valid_at_ms=valid_at_ms,
        limit=SEMANTIC_POOL,
    )
    lexical, docs = _rank(tx, call, lexical_terms, valid_at_ms, with_recency=False, df=focus.df)  # meanwhile
    windows = named_windows(query)
    answer = cache.finish(tx, semantic, payload_of)
    model, nearest = cache.model, answer.nearest
    at = {doc.record_id: doc.valid_from_ms for doc in docs}
    subjects = {doc.record_id: subject(doc.fields["primary"].split()) for doc in docs}
    for neighbour in nearest:
        at.setdefault(neighbour.record_id, neighbour.valid_from_ms)
        subjects.setdefault(neighbour.record_id, neighbour.subject)
    channels = [
        _lexical_receipt(deps, lexical_terms, len(docs)),
        _semantic_receipt(model, answer.eligible, len(nearest), len(frequent)),
    ]
    full = full_match(lexical_terms, focus.df, focus.doc_count)
    cosines = [(n.record_id, n.score) for n in nearest]
    fused = fuse(lexical, cosines, full_match=full)
    shares = lexical_shares(_telling(lexical_terms, query), focus.df, focus.doc_count, docs)
    names_scope = not frequent.isdisjoint(subjects.values())
    script = script_of(query)

    def crosses(record_id: str) -> bool:
        try:
            return script_of(primary_text(payload_of(record_id))) != script
        except ContractError:  # a body that does not open is no evidence either way
            return False

    relevant = relevant_ids(shares, cosines, model.floors, names_scope=names_scope, crosses=crosses)
    ranked = []
    for doc_id, score in fused.items():
        if relevant is not None and doc_id not in relevant:
            continue
        relevance = _date_boosted(_subject_boosted(score, subjects[doc_id], terms, SUBJECT_BOOST), at[doc_id], windows)
        ranked.append(Scored(doc_id, round(blend(relevance, recency(valid_at_ms - at[doc_id])), 9)))
    ranked.sort(key=lambda s: (-s.score, s.doc_id))
    return _Ranking(ranked, channels, list(answer.embedded))


def _semantic_receipt(model: SemanticModel, eligible: int, pooled: int, frequent: int) -> dict[str, Any]:
    embedder = model.embedder
    return {
        "channel": "semantic",
        "index": "record_vectors",
        "model": embedder.model_id,
        "model_version": embedder.model_version,
        "dimension": embedder.dimension,
        "eligible": eligible,
        "pooled": pooled,
        "frequent_terms": frequent,
    }


def _keep(deps: Deps, call: Call, embedded: list[Embedded]) -> None:
    """Writes the vectors a search computed, so the next search finds them stored."""
    if deps.indexer is not None:
        deps.indexer.write(call.scope, embedded)
        return
    if deps.semantic is None:
        return
    try:
        with deps.store.write(synced=False, scopes=(call.scope,)) as tx:
            for item in embedded:
                tx.put_vector(call.scope, item.record_id, item.vector_id, to_bytes(item.vector), item.subject)
    except ContractError:
        pass  # derived data: the next search embeds them again


def _profile(cache: VectorCache | None) -> tuple[str, int, str]:
    """The ranking profile, its version and its formula: lexical without a model, hybrid with one."""
    if cache is None:
        return PROFILE, PROFILE_VERSION, lexical_formula() + relevance_formula(LEXICAL_FLOORS)
    formula = hybrid_formula(cosine_formula(cache.model)) + relevance_formula(cache.model.floors)
    return HYBRID_PROFILE, HYBRID_PROFILE_VERSION, formula


def _as_of(page: PagePin, head: ScopeHead, ranking: _Ranking) -> dict[str, Any]:
    """The receipt's account of what was ranked: as of when, through which cursor, in which order."""
    ranked = ranking.ranked
    return {
        "valid_as_of": format_instant(page.valid_as_of),
        "system_as_of": format_instant(page.system_as_of),
        "through_cursor": head.records_cursor,
        "candidate_count": len(ranked),
        "ordered_ids_digest": digest(RANK_ORDER_DOMAIN, [scored.doc_id for scored in ranked]),
        "channels": ranking.channels,
    }


def search(deps: Deps, call: Call, arguments: SearchArguments) -> dict[str, Any]:
    """Raises ContractError STALE_PAGE, RANKING_UNAVAILABLE, PROJECTION_OVERSIZED, PROJECTION_STALE (the
    scope awaits a re-index), POLICY_UNAVAILABLE, BLOB_MISSING, STORE_UNAVAILABLE. No match is an empty
    list, never an error."""
    policy = deps.policies.current()
    minimum = arguments.minimum_channels
    cache = deps.semantic
    if minimum != "lexical" and cache is None:
        # No embedding model is installed: say so rather than answer lexically.
        raise ContractError(ErrorCode.RANKING_UNAVAILABLE)
    profile, profile_version, formula = _profile(cache)
    limit, budget = arguments.limit, arguments.max_packet_bytes
    params = {
        "query": arguments.query,
        "limit": limit,
        "max_packet_bytes": budget,
        "capability_policy": {"minimum_channels": minimum, "network": arguments.network},
    }
    request_digest = digest(
        RANK_REQUEST_DOMAIN,
        {
            "scope": call.scope.ref,
            "principal": call.binding.principal,
            "profile": profile,
            "profile_version": profile_version,
            "params": params,
        },
    )
    if deps.indexer is not None:
        deps.indexer.settle()

    def ranked_page(tx: RecallTx) -> tuple[ScopeHead, PagePin, _Ranking, list[dict[str, Any]]]:
        head = tx.head(call.scope) or journal.initial_head(call.scope)
        offset, valid_as_of, system_as_of = 0, call.now_ms, call.now_ms
        if arguments.page_cursor is not None:
            pin = open_cursor(deps.cursor_key, arguments.page_cursor, request_digest)
            if pin is None or pin.records_cursor != head.records_cursor:
                raise ContractError(ErrorCode.STALE_PAGE)
            offset, valid_as_of, system_as_of = pin.offset, pin.valid_as_of, pin.system_as_of
        generation = head.records_cursor
        ranking = (
            _lexical(deps, tx, call, arguments.query, valid_as_of, generation)
            if cache is None
            else _hybrid(deps, cache, tx, call, arguments.query, valid_as_of, generation)
        )
        ranked = ranking.ranked
        packets = page_packets(deps, tx, call.scope, ranked[offset : offset + limit], offset + 1, policy, budget)
        return head, PagePin(offset, generation, valid_as_of, system_as_of), ranking, packets

    head, page, ranking, packets = read_scope(deps, call.scope, ranked_page)
    ranked, offset = ranking.ranked, page.offset
    if ranking.embedded:
        _keep(deps, call, ranking.embedded)
    receipt: dict[str, Any] = {
        "request_digest": request_digest,
        "profile": profile,
        "profile_version": profile_version,
        "formula_ref": formula,
        **_as_of(page, head, ranking),
    }
    value: dict[str, Any] = {"records": packets, "rank_receipt": receipt}
    next_offset = offset + len(packets)
    if next_offset < len(ranked):
        value["next_page_cursor"] = mint_cursor(
            deps.cursor_key,
            request_digest,
            PagePin(next_offset, head.records_cursor, page.valid_as_of, page.system_as_of),
        )
    value["response_digest"] = digest(RESPONSE_DOMAIN, value)
    return value


def get(deps: Deps, call: Call, arguments: GetArguments) -> dict[str, Any]:
    """Raises ContractError NOT_FOUND (unknown, out of scope, or not eligible: indistinguishable),
    PROJECTION_OVERSIZED, POLICY_UNAVAILABLE, BLOB_MISSING, STORE_UNAVAILABLE."""
    policy = deps.policies.current()
    budget = arguments.max_packet_bytes

    def found(tx: RecallTx) -> tuple[RecordRow, dict[str, Any], list[str], str, ScopeHead]:
        record = tx.get_record(call.scope, arguments.record_id)
        if record is None or not eligible(record, call.now_ms):
            raise ContractError(ErrorCode.NOT_FOUND)
        payload = read_payload(deps, tx, call.scope, record.record_id, "record")
        view, removed, redaction_digest = redacted_view(record, payload, policy)
        return record, view, removed, redaction_digest, tx.head(call.scope) or journal.initial_head(call.scope)

    record, view, removed, redaction_digest, head = read_scope(deps, call.scope, found)
    now = format_instant(call.now_ms)
    read_receipt: dict[str, Any] = {
        "record_id": record.record_id,
        "record_digest": record.payload_digest,
        "valid_as_of": now,
        "system_as_of": now,
        "validated_through_cursor": head.cursor,
        "authorization_receipt_digest": authorization_receipt_digest(call, Tool.GET.value),
        "revalidation_receipt_digest": digest(
            REVALIDATION_DOMAIN,
            {
                "record_id": record.record_id,
                "state": record.state,
                "state_cursor": record.state_cursor,
                "eligible": True,
                "valid_as_of": call.now_ms,
                "through_cursor": head.cursor,
            },
        ),
        "checked_at": now,
    }
    read_receipt["receipt_digest"] = digest(READ_RECEIPT_DOMAIN, read_receipt)
    packet: dict[str, Any] = {
        "record": view,
        "redacted_fields": removed,
        "redaction_receipt_digest": redaction_digest,
        "read_receipt": read_receipt,
    }
    packet["packet_digest"] = digest(PACKET_DOMAIN, packet)
    if len(canonical_json(packet)) > budget:
        raise ContractError(ErrorCode.PROJECTION_OVERSIZED)
    return packet
