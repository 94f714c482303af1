"""Erasing a record for good: the one definition of what tombstoning destroys, for forget and the host alike.

Inside the transaction the record leaves every derived index and its body goes, keeping only the
keyed fingerprints of its content for the tombstone guard; after the commit its data key is destroyed.
"""

from __future__ import annotations

from typing import Any, Protocol

from engram_memory.contract.canonical import COVERAGE_DOMAIN, digest
from engram_memory.contract.errors import ContractError
from engram_memory.engine.deps import Deps
from engram_memory.engine.lifecycle.tombstone_guard import forgotten_fingerprints, guard_key
from engram_memory.engine.ports.agent_tx import BodiesTx, FamiliesTx, LexicalIndexTx, TombstonesTx
from engram_memory.engine.ports.store import RecordRow, Scope
from engram_memory.engine.sealing.bodies import read_payload


class ErasureTx(BodiesTx, FamiliesTx, LexicalIndexTx, TombstonesTx, Protocol):
    """What a forgotten record leaves behind (body, families, index entry) and the tombstone replacing it."""


def erase_record(deps: Deps, tx: ErasureTx, record: RecordRow, at_ms: int) -> dict[str, str]:
    """Drops the record from the lexical index (merging the deleted tokens away) and destroys its body.

    Keyed fingerprints of its content stay behind (engine/lifecycle/tombstone_guard.py), so the same content
    coming back waits for a human; a body that no longer opens leaves its digest's alone.
    Returns the derived surfaces and what became of each, for the coverage receipt.
    """
    try:
        payload: dict[str, Any] | None = read_payload(deps, tx, record.scope, record.record_id, "record")
    except ContractError:
        payload = None
    unindexed = tx.unindex_record(record.scope, record.record_id)
    if unindexed:
        # Deleted FTS5 tokens would otherwise linger in old segments.
        tx.purge_index()
    body_destroyed = tx.destroy_body(record.scope, record.record_id)
    tx.drop_record_families(record.scope, record.record_id)
    fingerprints = forgotten_fingerprints(guard_key(deps.cursor_key), record.payload_digest, payload)
    tx.add_tombstone(record.scope, fingerprints, at_ms)
    return {
        "body": "erased" if body_destroyed else "absent",
        "lexical_index": "purged" if unindexed else "absent",
        "vectors": "absent",
        "caches": "absent",
    }


def coverage_of(record_id: str, cursor: int, surfaces: dict[str, str]) -> dict[str, Any]:
    """What a coverage receipt attests, before the data key's fate is known."""
    return {"record_id": record_id, "cursor": cursor, "surfaces": dict(surfaces)}


def destroy_record_key(deps: Deps, scope: Scope, coverage: dict[str, Any]) -> str:
    """After the commit: destroys the data key, asks for the record's vector to leave the scope's shared
    vector files (engine/recall/shared_index.py: "pending" until a worker rewrites them, "absent" when they
    never held it), and returns the coverage receipt digest saying what went.

    Idempotent, so a replay or a retry after a crash finishes what the first run could not.
    """
    destroyed = deps.vault.destroy([coverage["record_id"]], deps.clock.now_ms())
    coverage["surfaces"]["data_key"] = "destroyed" if destroyed else "pending"
    if deps.semantic is not None:
        coverage["surfaces"]["shared_vectors"] = deps.semantic.forgotten(scope, coverage["record_id"])
    return digest(COVERAGE_DOMAIN, coverage)
