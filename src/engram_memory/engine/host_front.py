"""The host's half of the engine's front: every host command reaches the store through these methods.

Agents enter by `Engine.handle`; the host's commands (records, review, verify, stats, revoke, expiry and
the key sweep) enter here. Keeping both behind one object means the host never holds the store, the vault
or the clock itself, so a command cannot skip the lifecycle, the journal or the engine's verifier.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

from engram_memory.contract.binding import Binding
from engram_memory.contract.errors import ContractError
from engram_memory.contract.instants import format_instant
from engram_memory.engine.admission import review
from engram_memory.engine.admission.review import CandidateView, ReviewDecision
from engram_memory.engine.deps import Deps
from engram_memory.engine.lifecycle import as_of, host_operations, host_transitions
from engram_memory.engine.lifecycle.as_of import ValidRecord
from engram_memory.engine.lifecycle.host_operations import HostOperation
from engram_memory.engine.lifecycle.host_transitions import MaintenanceOutcome, RecordDetails, Transition
from engram_memory.engine.lifecycle.housekeeping import KeySweep
from engram_memory.engine.lifecycle.shredded import Settled, settle_shredded
from engram_memory.engine.ports.maintenance import RecordFilter
from engram_memory.engine.ports.operations import StateCount
from engram_memory.engine.ports.rows import AuditRow, CandidateRow, IssuedBindingRow, RecordRow, RevocationRow, Scope
from engram_memory.engine.recall.reindex import RebuildReport, rebuild_from_bodies
from engram_memory.engine.verify import VerifyReport, verify_store


@dataclass(frozen=True, slots=True)
class StateTallies:
    """What `stats` counts in one read: states per scope, journal sizes, index sizes, revocations."""

    candidates: list[StateCount]
    records: list[StateCount]
    events: dict[Scope, int]
    indexed: dict[Scope | None, int]
    revocations: int


@dataclass(frozen=True, slots=True)
class Revocation:
    stored: RevocationRow
    already: bool


_PROBE = Scope(tenant="readiness-probe", workspace="readiness-probe")


class UnknownBinding(Exception):
    """A token id this home has no record of issuing (nor of revoking): most likely a typo."""


class HostFront:
    """Mixed into `Engine`; `deps` is the engine's."""

    deps: Deps
    key_sweep: KeySweep

    # -- records: the host's lifecycle transitions (declared in engine/lifecycle/host_operations.py) ------
    def host_operations(self) -> Mapping[str, HostOperation]:
        return host_operations.HOST_OPERATIONS

    def transition(
        self, operation: str, record_id: str, *, decided_by: str, reason_ref: str | None = None, **arguments: str | None
    ) -> MaintenanceOutcome:
        """Runs one declared operation; `arguments` by the names it declares (another record's id, or one of
        its choices). Raises MaintenanceRefused (nothing written), ContractError from the store."""
        return host_operations.named(operation).apply(
            self.deps, record_id, decided_by=decided_by, reason_ref=reason_ref, given=arguments
        )

    def expire_due(self, limit: int = 1000) -> list[Transition]:
        """Every record whose retention has passed, as of the engine's clock."""
        return host_transitions.expire_due(self.deps, self.deps.clock.now_ms(), limit)

    def records(self, filters: RecordFilter) -> list[RecordRow]:
        return host_transitions.list_records(self.deps, filters)

    def records_valid_at(
        self,
        scope: Scope,
        valid_at_ms: int,
        *,
        family_ref: str | None = None,
        limit: int = 1000,
        known_at_ms: int | None = None,
    ) -> list[ValidRecord]:
        """Which records were true at a valid time, as the store knows it now or knew it at `known_at_ms`
        (engine/lifecycle/as_of.py)."""
        return as_of.records_valid_at(
            self.deps, scope, valid_at_ms, family_ref=family_ref, limit=limit, known_at_ms=known_at_ms
        )

    def record_details(self, record_id: str) -> RecordDetails:
        return host_transitions.show_record(self.deps, record_id)

    # -- the review queue ----------------------------------------------------------------------------
    def review_queue(
        self, *, include_unsent: bool = False, limit: int = review.DEFAULT_QUEUE_LIMIT
    ) -> list[CandidateRow]:
        return review.review_queue(self.deps, include_unsent=include_unsent, limit=limit)

    def candidate_view(self, candidate_id: str) -> CandidateView:
        return review.show_candidate(self.deps, candidate_id)

    def accept_candidate(
        self, candidate_id: str, *, decided_by: str, reason_ref: str | None = None, supersede: bool | None = None
    ) -> ReviewDecision:
        return review.accept_candidate(
            self.deps, candidate_id, decided_by=decided_by, reason_ref=reason_ref, supersede=supersede
        )

    def reject_candidate(self, candidate_id: str, *, decided_by: str, reason_ref: str | None = None) -> ReviewDecision:
        return review.reject_candidate(self.deps, candidate_id, decided_by=decided_by, reason_ref=reason_ref)

    # -- operations ----------------------------------------------------------------------------------
    def verify(self, *, full: bool) -> VerifyReport:
        """The engine's own verifier: chains, heads, fold, tables, bodies (when full) and indexes."""
        return verify_store(self.deps, full=full)

    def housekeep(self) -> tuple[list[Transition], int]:
        """Automatic expiry, a bounded slice of the sweep of data keys whose body already ended, then the
        physical erasure.

        Returns (records expired, data keys swept). Raises ContractError STORE_UNAVAILABLE.
        """
        expired = self.expire_due()
        swept = self.key_sweep.run(self.deps)
        self.deps.store.erase_physically()
        return expired, swept

    def refresh_statistics(self) -> None:
        """What the host's import runs at its end: see Store.refresh_statistics."""
        self.deps.store.refresh_statistics()

    def erase_now(self) -> bool:
        """The erasure step an operator runs: forgotten text leaves the store's live files now, not after
        the server store's compaction delay. False when an older snapshot held it back (run it again)."""
        return self.deps.store.erase_physically(now=True)

    def state_tallies(self) -> StateTallies:
        """One consistent read of the store's counts, and the vault's revocations. Raises ContractError."""
        with self.deps.store.read() as tx:
            candidates = tx.candidate_state_counts()
            records = tx.record_state_counts()
            events = tx.journal_event_counts()
            indexed = tx.indexed_counts()
        return StateTallies(candidates, records, events, indexed, self.deps.vault.revocation_count())

    @contextmanager
    def audit_rows(self, since_ms: int | None, until_ms: int | None) -> Iterator[Iterator[AuditRow]]:
        """The audit log in audit order, read inside one transaction that lasts as long as the block."""
        with self.deps.store.read() as tx:
            yield iter(tx.audit_rows(since_ms, until_ms))

    def revoke_token(self, token_id: str, *, revoked_by: str, unlisted: bool = False) -> Revocation:
        """Revokes a binding's token id; a second revocation keeps the first one's time and person.

        Raises UnknownBinding for an id this home never issued, unless `unlisted` (a token signed before
        homes kept a list of what they issue, or by a copy of the signing key elsewhere)."""
        vault = self.deps.vault
        already = vault.is_revoked(token_id)
        if not (already or unlisted or vault.was_issued(token_id)):
            raise UnknownBinding(token_id)
        wanted = RevocationRow(token_id=token_id, revoked_at_ms=self.deps.clock.now_ms(), revoked_by=revoked_by)
        return Revocation(vault.revoke(wanted), already)

    def vector_queue_depth(self) -> int:
        """Admitted records of this process still waiting for their vector (0 without a semantic channel)."""
        return 0 if self.deps.indexer is None else self.deps.indexer.depth

    def ready(self) -> bool:
        """Whether the store and the key vault answer now (a load balancer's readiness probe)."""
        try:
            with self.deps.store.read() as tx:
                tx.head(_PROBE)  # one indexed read: the store answers queries, not only connections
            self.deps.vault.revocation_count()
        except ContractError:
            return False
        return True

    def is_revoked(self, token_id: str) -> bool:
        return self.deps.vault.is_revoked(token_id)

    def binding_unusable(self, binding: Binding) -> str | None:
        """Why every call with this verified binding would be refused now ("is revoked", "expired at …"),
        or None; a revocation is named first, as calls answer it first."""
        if self.is_revoked(binding.token_id):
            return "is revoked"
        if binding.expired_at(self.deps.clock.now_ms()):
            return f"expired at {format_instant(binding.expires_at_ms)}"
        return None

    def record_binding(self, issued: IssuedBindingRow) -> None:
        """Keeps the claims of a binding the host just signed, for `bindings list` and `revoke`."""
        self.deps.vault.record_issued(issued)

    def bindings(
        self, limit: int, *, latest_only_for: str | None = None
    ) -> list[tuple[IssuedBindingRow, RevocationRow | None]]:
        """The bindings this home issued, newest first, each with its revocation if it has one; those issued
        by `latest_only_for` only as the newest of their session (one per refresh of a sign-in grant)."""
        return self.deps.vault.issued(limit, latest_only_for=latest_only_for)

    # -- restore: settling what a backup cannot bring back -------------------------------------------
    def settle_shredded(self, *, decided_by: str, reason_ref: str) -> Settled:
        """Ends every body whose data key the vault destroyed: records tombstoned, candidates withdrawn."""
        return settle_shredded(self.deps, decided_by=decided_by, reason_ref=reason_ref)

    def rebuild_indexes(self, progress: Callable[[int, int], None] | None = None) -> RebuildReport:
        """Opens every body left, indexing (and embedding) the accepted_current records, and counts the
        bodies that did not open; `progress(done, total)` is told as it goes."""
        return rebuild_from_bodies(self.deps, progress)
