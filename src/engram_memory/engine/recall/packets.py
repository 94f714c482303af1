"""The packets of a page of search hits: each the summary of a redacted record view.

A page's records, bodies and data keys are read in one go each: on a server store every read is a
round trip, and ten hits read one by one cost more than the ranking that found them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from engram_memory.contract.canonical import canonical_json
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.admission.policy import AdmissionPolicy
from engram_memory.engine.deps import Deps
from engram_memory.engine.ports.agent_tx import BodiesTx, RecordsTx
from engram_memory.engine.ports.store import RecordRow, Scope
from engram_memory.engine.projection import record_view, redact, redaction_receipt_digest, summary_view
from engram_memory.engine.recall.ranking import Scored
from engram_memory.engine.sealing.bodies import read_payloads


def redacted_view(
    record: RecordRow, payload: dict[str, Any], policy: AdmissionPolicy
) -> tuple[dict[str, Any], list[str], str]:
    """The record as agents read it, the fields the policy removed, and the receipt of the removal."""
    view, removed = redact(record_view(record, payload), policy.redact_fields)
    return view, removed, redaction_receipt_digest(record.record_id, record.payload_digest, removed, policy.digest)


class PacketTx(RecordsTx, BodiesTx, Protocol):
    """What a page of packets reads: records and their bodies."""


def page_packets(
    deps: Deps,
    tx: PacketTx,
    scope: Scope,
    page: Sequence[Scored],
    first_rank: int,
    policy: AdmissionPolicy,
    budget: int,
) -> list[dict[str, Any]]:
    """Packets in rank order until the next would pass `budget` bytes. Raises ContractError BLOB_MISSING
    (a ranked record or its body is gone), PROJECTION_OVERSIZED (not even the first fits)."""
    ids = [scored.doc_id for scored in page]
    records = tx.get_records(scope, ids)
    if len(records) != len(set(ids)):
        raise ContractError(ErrorCode.BLOB_MISSING)
    payloads = read_payloads(deps, tx, scope, ids, "record")
    packets: list[dict[str, Any]] = []
    used = 0
    for position, scored in enumerate(page, start=first_rank):
        view, removed, redaction_digest = redacted_view(records[scored.doc_id], payloads[scored.doc_id], policy)
        packet = {
            "record": summary_view(view),
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
    return packets
