"""Search and get (SPEC §4, §9): only accepted_current records of the bound scope, with receipts.

A ranking is a pure function of the pinned state (the scope's records cursor and the valid-time
as-of), so page two recomputes page one's order exactly; a cursor from any other state is STALE_PAGE.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engram_memory.contract.canonical import (
    PACKET_DOMAIN,
    RANK_ORDER_DOMAIN,
    RANK_RECEIPT_DOMAIN,
    RANK_REQUEST_DOMAIN,
    READ_RECEIPT_DOMAIN,
    RESPONSE_DOMAIN,
    REVALIDATION_DOMAIN,
    canonical_json,
    digest,
)
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.instants import format_instant
from engram_memory.contract.states import RecordState
from engram_memory.contract.tools import Tool
from engram_memory.engine import journal
from engram_memory.engine.bodies import read_payload
from engram_memory.engine.calls import Call
from engram_memory.engine.cursors import mint_cursor, open_cursor
from engram_memory.engine.deps import Deps
from engram_memory.engine.policy import AdmissionPolicy
from engram_memory.engine.ports import RecordRow, StoreTx
from engram_memory.engine.projection import record_view, redact, redaction_receipt_digest
from engram_memory.engine.ranking import FIELDS, FORMULA_REF, CorpusStats, Document, Scored, rank
from engram_memory.engine.receipts import authorization_receipt_digest
from engram_memory.engine.text import query_terms

PROFILE = "lexical-bm25f"
PROFILE_VERSION = 1
CANDIDATE_POOL = 1000
DEFAULT_LIMIT = 10
DEFAULT_PACKET_BYTES = 65_536


def eligible(record: RecordRow, valid_at_ms: int) -> bool:
    """Current, valid at `valid_at_ms` (inside [t, t_end]), and not past its retention expiry."""
    return (
        record.state == RecordState.ACCEPTED_CURRENT.value
        and record.valid_from_ms <= valid_at_ms
        and (record.valid_to_ms is None or valid_at_ms <= record.valid_to_ms)
        and (record.expires_at_ms is None or record.expires_at_ms > valid_at_ms)
    )


def _redacted_view(
    deps: Deps, tx: StoreTx, record: RecordRow, policy: AdmissionPolicy
) -> tuple[dict[str, Any], list[str], str]:
    view, removed = redact(
        record_view(record, read_payload(deps, tx, record.scope, record.record_id, "record")), policy.redact_fields
    )
    return (
        view,
        removed,
        redaction_receipt_digest(record.record_id, record.payload_digest, removed, policy.digest),
    )


def _rank(tx: StoreTx, call: Call, terms: Sequence[str], valid_at_ms: int) -> tuple[list[Scored], int]:
    docs = tx.lexical_candidates(call.scope, terms, valid_at_ms=valid_at_ms, limit=CANDIDATE_POOL)
    if not docs:
        return [], 0
    stats = tx.index_stats(call.scope)
    count = max(stats.doc_count, 1)
    corpus = CorpusStats(
        doc_count=stats.doc_count,
        avg_field_len={name: stats.field_token_totals.get(name, 0) / count for name in FIELDS},
    )
    documents = [Document(doc_id=doc.record_id, fields={n: doc.fields[n].split() for n in FIELDS}) for doc in docs]
    ages = {doc.record_id: valid_at_ms - doc.valid_from_ms for doc in docs}
    ranked = rank(terms, documents, tx.term_doc_counts(call.scope, terms), corpus, ages_ms=ages)
    return ranked, len(docs)


def search(deps: Deps, call: Call, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Raises ContractError STALE_PAGE, RANKING_UNAVAILABLE, PROJECTION_OVERSIZED, POLICY_UNAVAILABLE,
    BLOB_MISSING, STORE_UNAVAILABLE. No match is an empty list, never an error."""
    policy = deps.policies.current()
    capability = arguments.get("capability_policy", {})
    minimum = capability.get("minimum_channels", "lexical")
    if minimum != "lexical":
        # No semantic channel is installed: say so rather than answer lexically.
        raise ContractError(ErrorCode.RANKING_UNAVAILABLE)
    limit = arguments.get("limit", DEFAULT_LIMIT)
    budget = arguments.get("max_packet_bytes", DEFAULT_PACKET_BYTES)
    params = {
        "query": arguments["query"],
        "limit": limit,
        "max_packet_bytes": budget,
        "capability_policy": {"minimum_channels": minimum, "network": capability.get("network", "forbid")},
    }
    request_digest = digest(
        RANK_REQUEST_DOMAIN,
        {
            "scope": call.scope.ref,
            "principal": call.binding.principal,
            "profile": PROFILE,
            "profile_version": PROFILE_VERSION,
            "params": params,
        },
    )
    terms = query_terms(arguments["query"])
    with deps.store.read() as tx:
        head = tx.head(call.scope) or journal.initial_head(call.scope)
        offset, valid_as_of, system_as_of = 0, call.now_ms, call.now_ms
        if "page_cursor" in arguments:
            claims = open_cursor(deps.cursor_key, arguments["page_cursor"])
            if (
                claims is None
                or claims.get("request_digest") != request_digest
                or claims.get("records_cursor") != head.records_cursor
            ):
                raise ContractError(ErrorCode.STALE_PAGE)
            offset, valid_as_of, system_as_of = (
                claims["offset"],
                claims["valid_as_of"],
                claims["system_as_of"],
            )
        ranked, pooled = _rank(tx, call, terms, valid_as_of)
        packets: list[dict[str, Any]] = []
        used = 0
        for position, scored in enumerate(ranked[offset : offset + limit], start=offset + 1):
            record = tx.get_record(call.scope, scored.doc_id)
            if record is None:
                raise ContractError(ErrorCode.BLOB_MISSING)
            view, removed, redaction_digest = _redacted_view(deps, tx, record, policy)
            packet = {
                "record": view,
                "redacted_fields": removed,
                "redaction_receipt_digest": redaction_digest,
                "score": scored.score,
                "rank": position,
            }
            size = len(canonical_json(packet))
            if used + size > budget:
                if not packets:
                    raise ContractError(ErrorCode.PROJECTION_OVERSIZED)
                break
            packets.append(packet)
            used += size
    receipt: dict[str, Any] = {
        "request_digest": request_digest,
        "profile": PROFILE,
        "profile_version": PROFILE_VERSION,
        "formula_ref": FORMULA_REF,
        "valid_as_of": format_instant(valid_as_of),
        "system_as_of": format_instant(system_as_of),
        "through_cursor": head.records_cursor,
        "candidate_count": len(ranked),
        "ordered_ids_digest": digest(RANK_ORDER_DOMAIN, [scored.doc_id for scored in ranked]),
        "channels": [
            {
                "channel": "lexical",
                "index": deps.store.index_name,
                "generation": head.records_cursor,
                "query_terms": len(terms),
                "pooled": pooled,
            }
        ],
    }
    receipt["receipt_digest"] = digest(RANK_RECEIPT_DOMAIN, receipt)
    value: dict[str, Any] = {"records": packets, "rank_receipt": receipt}
    next_offset = offset + len(packets)
    if next_offset < len(ranked):
        value["next_page_cursor"] = mint_cursor(
            deps.cursor_key,
            {
                "v": 1,
                "request_digest": request_digest,
                "records_cursor": head.records_cursor,
                "offset": next_offset,
                "valid_as_of": valid_as_of,
                "system_as_of": system_as_of,
            },
        )
    value["response_digest"] = digest(RESPONSE_DOMAIN, value)
    return value


def get(deps: Deps, call: Call, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Raises ContractError NOT_FOUND (unknown, out of scope, or not eligible: indistinguishable),
    PROJECTION_OVERSIZED, POLICY_UNAVAILABLE, BLOB_MISSING, STORE_UNAVAILABLE."""
    policy = deps.policies.current()
    budget = arguments.get("max_packet_bytes", DEFAULT_PACKET_BYTES)
    with deps.store.read() as tx:
        record = tx.get_record(call.scope, arguments["record_id"])
        if record is None or not eligible(record, call.now_ms):
            raise ContractError(ErrorCode.NOT_FOUND)
        view, removed, redaction_digest = _redacted_view(deps, tx, record, policy)
        head = tx.head(call.scope) or journal.initial_head(call.scope)
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
