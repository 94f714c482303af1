"""What every engine operation is given: the store, the key ring, the policy source, time and MAC keys.

Built once by the host's composition root and passed down; no operation reaches for globals.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram_memory.engine.admission.policy import PolicySource
from engram_memory.engine.ports.store import Clock, KeyRing, KeyVault, Store
from engram_memory.engine.recall.indexer import VectorIndexer
from engram_memory.engine.recall.semantic import VectorCache


@dataclass(frozen=True, slots=True)
class Deps:
    store: Store
    keyring: KeyRing
    vault: KeyVault
    policies: PolicySource
    clock: Clock
    cursor_key: bytes
    audit_key: bytes
    # The semantic channel, when an embedding model is installed; None means lexical ranking only.
    semantic: VectorCache | None = None
    # Embeds admitted records off the request path; None embeds them inside the admission instead.
    indexer: VectorIndexer | None = None
    # An agent's admission embeds its candidate before its transaction and writes the vector with the
    # record, so no other process's search has to embed it; a host import leaves it to the indexer (which
    # keeps its throughput).
    embed_ahead: bool = True
