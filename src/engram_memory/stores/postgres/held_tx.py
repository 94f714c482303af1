"""The server store's transaction as a batch runs it: the hot path's writes held back, its reads looking there first.

Outside a batch (`pending` None) every method is the shared statement. Inside one, a write of the hot
path goes to the batch's log (deferred.py), and a read answers from the log and then from the database
without writing the log first (`_unflushed`), which is exact because no held row can change what the
database answers: each read below says why. Every other statement writes the log first
(PsycopgConnection.before_statement).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext

from engram_memory.engine.ports.rows import (
    CandidateRow,
    IdempotencyRow,
    JournalEvent,
    RecordRow,
    Scope,
    ScopeHead,
    SealedBody,
)
from engram_memory.stores.postgres.connection import PsycopgConnection
from engram_memory.stores.postgres.deferred import (
    BodyDiscard,
    BodyPut,
    CandidateUpdate,
    PendingWrites,
    merged_bodies,
)
from engram_memory.stores.postgres.heads import HeadCache
from engram_memory.stores.postgres.lock_facts import LockFacts
from engram_memory.stores.sql.queries.transaction import SqlTx


class HeldRowsTx(SqlTx):
    """The methods a batch's log answers or takes; PostgresTx adds the rest of the dialect."""

    _db: PsycopgConnection

    def __init__(
        self,
        connection: PsycopgConnection,
        *,
        heads: HeadCache | None,
        pending: PendingWrites | None,
        facts: LockFacts | None = None,
    ) -> None:
        super().__init__(connection)
        self._heads = heads
        self._pending = pending
        self._facts = facts

    def _unflushed(self, safe: bool = True) -> AbstractContextManager[None]:
        """A statement whose answer no held row can change runs without writing them first."""
        return self._db.unflushed() if safe and self._pending is not None else nullcontext()

    def head(self, scope: Scope) -> ScopeHead | None:
        if self._heads is None:
            return super().head(scope)
        head = self._heads.get(scope)
        if head is None:
            # A scope with held events whose head is not kept is read once they are written.
            with self._unflushed(not (self._pending and self._pending.holds_events(scope))):
                head = super().head(scope)
        if head is not None:
            self._heads.read(scope, head)
        return head

    def append_event(self, event: JournalEvent) -> None:
        if self._pending is None:
            super().append_event(event)
        else:
            self._pending.add(event)
        if self._heads is not None:
            self._heads.appended(event)

    def insert_candidate(self, row: CandidateRow) -> None:
        if self._pending is None:
            super().insert_candidate(row)
        else:
            self._pending.add(row)

    def get_candidate(self, scope: Scope, candidate_id: str) -> CandidateRow | None:
        if self._pending is not None:
            held = self._pending.candidate(scope, candidate_id)
            if held is not None:
                return held
            if self._pending.updates_stored_candidate(candidate_id):
                return super().get_candidate(scope, candidate_id)  # written first: the update is held
        with self._unflushed():
            return super().get_candidate(scope, candidate_id)

    def update_candidate(
        self,
        scope: Scope,
        candidate_id: str,
        *,
        state: str,
        adjudication: bool,
        record_id: str | None,
        review_reasons: Sequence[str] = (),
    ) -> None:
        if self._pending is None:
            super().update_candidate(
                scope,
                candidate_id,
                state=state,
                adjudication=adjudication,
                record_id=record_id,
                review_reasons=review_reasons,
            )
            return
        update = CandidateUpdate(scope, candidate_id, state, adjudication, record_id, tuple(review_reasons))
        self._pending.add(update)

    def insert_record(self, row: RecordRow) -> None:
        if self._pending is None:
            super().insert_record(row)
        else:
            self._pending.add(row)

    def find_record_by_digest(self, scope: Scope, payload_digest: str, state: str) -> str | None:
        # Stored records change state only by statements that write the log first; held ones are newer
        # (larger rids), so a stored match comes first.
        with self._unflushed():
            stored = super().find_record_by_digest(scope, payload_digest, state)
        if stored is None and self._pending is not None:
            return self._pending.record_by_digest(scope, payload_digest, state)
        return stored

    def put_body(self, scope: Scope, owner_id: str, body: SealedBody) -> None:
        if self._pending is None:
            super().put_body(scope, owner_id, body)
        else:
            self._pending.add(BodyPut(scope, owner_id, body))

    def get_body(self, scope: Scope, owner_id: str) -> SealedBody | None:
        if self._pending is not None:
            known, body = self._pending.body(owner_id)
            if known:
                return body
        with self._unflushed():  # a body the log does not know was not put or discarded by it
            return super().get_body(scope, owner_id)

    def get_bodies(self, scope: Scope, owner_ids: Sequence[str]) -> dict[str, SealedBody]:
        if self._pending is None:
            return super().get_bodies(scope, owner_ids)
        held = {owner_id: self._pending.body(owner_id) for owner_id in owner_ids}
        with self._unflushed():
            stored = super().get_bodies(scope, [owner_id for owner_id in owner_ids if not held[owner_id][0]])
        return merged_bodies(held, stored)

    def destroy_body(self, scope: Scope, owner_id: str) -> bool:
        if self._pending is not None and self._pending.body(owner_id)[1] is not None:
            self._pending.add(BodyDiscard(scope, owner_id))
            return True
        return super().destroy_body(scope, owner_id)

    def discard_body(self, scope: Scope, owner_id: str) -> None:
        if self._pending is None:
            super().discard_body(scope, owner_id)
        else:
            self._pending.add(BodyDiscard(scope, owner_id))

    def is_tombstoned(self, scope: Scope, fingerprints: Sequence[str]) -> bool:
        with self._unflushed():  # tombstones are never held back
            return super().is_tombstoned(scope, fingerprints)

    def holds_tombstones(self, scope: Scope) -> bool:
        if self._facts is not None and self._facts.untombstoned.known(scope):
            return False
        with self._unflushed():  # tombstones are never held back
            held = super().holds_tombstones(scope)
        if not held and self._facts is not None:
            self._facts.untombstoned.found_none(scope)
        return held

    def add_tombstone(self, scope: Scope, fingerprints: Sequence[str], at_ms: int) -> None:
        if self._facts is not None:
            self._facts.untombstoned.tombstoned(scope)
        super().add_tombstone(scope, fingerprints, at_ms)

    def get_idempotency(self, scope: Scope, principal: str, key: str) -> IdempotencyRow | None:
        if self._pending is not None:
            held = self._pending.idempotency(scope, principal, key)
            if held is not None:
                return held
        if self._facts is not None:
            keys = self._facts.keys
            known, row = keys.known(scope, principal, key)
            if known:
                return row
            ahead = keys.window(scope, principal, key)
            if ahead:
                with self._unflushed():  # keys the log holds were answered above; these it does not hold
                    found = self._idempotency_rows(scope, principal, ahead)
                keys.fill(scope, principal, ahead, found)
                return found.get(key)
        with self._unflushed():
            return super().get_idempotency(scope, principal, key)

    def _idempotency_rows(self, scope: Scope, principal: str, keys: Sequence[str]) -> dict[str, IdempotencyRow]:
        self._enter_tenant(scope.tenant)
        rows = self._db.execute(
            "SELECT idem_key, tool, operation_digest, target, response, created_at_ms FROM idempotency"
            " WHERE tenant = ? AND workspace = ? AND principal = ? AND idem_key = ANY (?::text[])",
            (scope.tenant, scope.workspace, principal, list(keys)),
        ).fetchall()
        return {
            str(row[0]): IdempotencyRow(
                scope=scope,
                principal=principal,
                key=str(row[0]),
                tool=row[1],
                operation_digest=row[2],
                target=row[3],
                response=json.loads(row[4]),
                created_at_ms=row[5],
            )
            for row in rows
        }

    def put_idempotency(self, row: IdempotencyRow) -> None:
        if self._facts is not None:
            self._facts.keys.written(row.scope, row.principal, row.key)
        if self._pending is None:
            super().put_idempotency(row)
        else:
            self._pending.add(row)
