"""The numbers behind `engram-memory stats`: states per scope, queues, keys, file sizes and index health.

Counts only: nothing is decrypted, no memory text is read. The store's counts come from one snapshot.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from engram_memory.contract.states import CandidateState, RecordState
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.host_vault import VaultCounts
from engram_memory.engine.ports.store import Scope
from engram_memory.host.compose import storage_sizes, vault_counts
from engram_memory.host.settings import HostPaths

_CURRENT = RecordState.ACCEPTED_CURRENT.value


@dataclass
class ScopeStats:
    scope: Scope
    candidates: Counter[str] = field(default_factory=Counter)
    records: Counter[str] = field(default_factory=Counter)
    journal_events: int = 0
    review_queue: int = 0
    open_confirmations: int = 0
    indexed: int = 0

    @property
    def index_healthy(self) -> bool:
        return self.indexed == self.records[_CURRENT]


@dataclass
class StoreStats:
    per_scope: list[ScopeStats]
    revoked_bindings: int
    vault: VaultCounts
    files: dict[str, int]
    stray_index_rows: int

    def as_json(self) -> dict[str, Any]:
        candidates: Counter[str] = Counter()
        records: Counter[str] = Counter()
        for item in self.per_scope:
            candidates.update(item.candidates)
            records.update(item.records)
        indexed = sum(item.indexed for item in self.per_scope) + self.stray_index_rows
        healthy = self.stray_index_rows == 0 and all(item.index_healthy for item in self.per_scope)
        return {
            "scopes": len(self.per_scope),
            "candidates": _states(candidates, [state.value for state in CandidateState]),
            "records": _states(records, [state.value for state in RecordState]),
            "journal_events": sum(item.journal_events for item in self.per_scope),
            "review_queue": sum(item.review_queue for item in self.per_scope),
            "open_confirmations": sum(item.open_confirmations for item in self.per_scope),
            "revoked_bindings": self.revoked_bindings,
            "vault": {"keys": self.vault.keys, "destroyed_keys": self.vault.destroyed},
            "files": dict(self.files),
            "index": {
                "indexed": indexed,
                "accepted_current": records[_CURRENT],
                "stray_rows": self.stray_index_rows,
                "healthy": healthy,
            },
            "per_scope": [
                {
                    "tenant": item.scope.tenant,
                    "workspace": item.scope.workspace,
                    "candidates": _states(item.candidates, [state.value for state in CandidateState]),
                    "records": _states(item.records, [state.value for state in RecordState]),
                    "journal_events": item.journal_events,
                    "review_queue": item.review_queue,
                    "open_confirmations": item.open_confirmations,
                    "indexed": item.indexed,
                    "index_healthy": item.index_healthy,
                }
                for item in self.per_scope
            ],
        }


def _states(counts: Counter[str], known: list[str]) -> dict[str, int]:
    """Every known state (zero when none), then any state this version does not know, as stored."""
    shown = {state: counts.get(state, 0) for state in known}
    shown.update((state, count) for state, count in sorted(counts.items()) if state not in shown)
    return shown


def gather_stats(engine: Engine, paths: HostPaths) -> StoreStats:
    """Raises ContractError STORE_UNAVAILABLE when the store or the vault cannot be read."""
    tallies = engine.state_tallies()
    candidate_counts, record_counts = tallies.candidates, tallies.records
    events, indexed, revoked = tallies.events, tallies.indexed, tallies.revocations
    scopes: dict[Scope, ScopeStats] = {}

    def of(scope: Scope) -> ScopeStats:
        return scopes.setdefault(scope, ScopeStats(scope))

    for count in candidate_counts:
        of(count.scope).candidates[count.state] += count.count
        if count.adjudication and count.state == CandidateState.PENDING.value:
            of(count.scope).review_queue += count.count
    for count in record_counts:
        of(count.scope).records[count.state] += count.count
    for scope, number in events.items():
        of(scope).journal_events = number
    for maybe_scope, number in indexed.items():
        if maybe_scope is not None:
            of(maybe_scope).indexed = number
    for row, _status in engine.confirmations():
        of(row.scope).open_confirmations += 1
    files = storage_sizes(paths)
    return StoreStats(
        per_scope=[scopes[scope] for scope in sorted(scopes, key=lambda s: (s.tenant, s.workspace))],
        revoked_bindings=revoked,
        vault=vault_counts(paths),
        files=files,
        stray_index_rows=indexed.get(None, 0),
    )
