"""Rows a batch holds back and writes in bulk (bulk.py): one statement per table instead of one per row.

Inside Store.batch (a host's import, the agent calls the server groups into one commit) the writes of
the hot path (journal events, candidates, records, sealed bodies, idempotency rows, index entries) are
kept here, in order, and written at the batch's next commit. On this machine a statement costs about
60 µs of the client's CPU and a round trip, and a capture with its admission took 27 of them. The rows
held back are the transaction's all the same:

* reads of held rows (idempotency keys, candidates, records by digest, bodies, heads) are answered
  here first, then by the database, whose answer for anything else no held row can change
  (held_tx.py);
* any other statement of the batch (the host's work, a gate, a forget: anything the log cannot
  answer) first writes every held row (batching.py), so it sees exactly what it would have seen
  without the log.

A write that fails drops its own entries (the log is cut back to where it began), as its savepoint
rolls back what of it reached the database.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from engram_memory.engine.ports.rows import (
    CandidateRow,
    IdempotencyRow,
    JournalEvent,
    RecordRow,
    Scope,
    SealedBody,
)


@dataclass(frozen=True, slots=True)
class CandidateUpdate:
    scope: Scope
    candidate_id: str
    state: str
    adjudication: bool
    record_id: str | None
    review_reasons: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class BodyPut:
    scope: Scope
    owner_id: str
    body: SealedBody


@dataclass(frozen=True, slots=True)
class BodyDiscard:
    scope: Scope
    owner_id: str


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """A record's index row and postings; its rid is the record's, found by id when written."""

    scope: Scope
    record_id: str
    values: tuple[str, ...]  # the field texts in FIELDS order
    tsv: str  # the tsvector literal (stores/postgres/queries.py index_tsvector)
    tokenizer: str


Op = JournalEvent | CandidateRow | CandidateUpdate | RecordRow | BodyPut | BodyDiscard | IdempotencyRow | IndexEntry


class PendingWrites:
    """The held rows of one batch, in the order written, with the views its reads need."""

    def __init__(self) -> None:
        self._ops: list[Op] = []
        self._mark = 0
        self._reset_views()

    def _reset_views(self) -> None:
        self._candidates: dict[str, CandidateRow] = {}
        self._updated: set[str] = set()  # candidates of the database with an update held here
        self._records: dict[str, RecordRow] = {}
        self._digests: dict[tuple[Scope, str, str], str] = {}  # (scope, digest, state) -> its first record
        self._bodies: dict[str, SealedBody | None] = {}  # None: discarded
        self._keys: dict[tuple[Scope, str, str], IdempotencyRow] = {}
        self._event_scopes: set[Scope] = set()

    # -- the log --------------------------------------------------------------------------------
    def __bool__(self) -> bool:
        return bool(self._ops)

    def begin_write(self) -> None:
        """Entries from here on belong to the write that begins (rollback_write drops them)."""
        self._mark = len(self._ops)

    def rollback_write(self) -> None:
        del self._ops[self._mark :]
        self._reset_views()
        for op in self._ops:
            self._view(op)

    def take(self, *, before_write: bool = False) -> list[Op]:
        """The entries to write now: all of them, or only those before the current write began."""
        cut = self._mark if before_write else len(self._ops)
        taken, self._ops = self._ops[:cut], self._ops[cut:]
        self._mark -= cut
        self._reset_views()
        for op in self._ops:
            self._view(op)
        return taken

    def clear(self) -> None:
        self._ops.clear()
        self._mark = 0
        self._reset_views()

    def add(self, op: Op) -> None:
        self._ops.append(op)
        self._view(op)

    def _view(self, op: Op) -> None:
        if isinstance(op, JournalEvent):
            self._event_scopes.add(op.scope)
        elif isinstance(op, CandidateRow):
            self._candidates[op.candidate_id] = op
        elif isinstance(op, CandidateUpdate):
            held = self._candidates.get(op.candidate_id)
            if held is None:
                self._updated.add(op.candidate_id)
            else:
                self._candidates[op.candidate_id] = updated_candidate(held, op)
        elif isinstance(op, RecordRow):
            self._records[op.record_id] = op
            self._digests.setdefault((op.scope, op.payload_digest, op.state), op.record_id)
        elif isinstance(op, BodyPut):
            self._bodies[op.owner_id] = op.body
        elif isinstance(op, BodyDiscard):
            self._bodies[op.owner_id] = None
        elif isinstance(op, IdempotencyRow):
            self._keys[(op.scope, op.principal, op.key)] = op

    # -- what the transaction's reads see -------------------------------------------------------
    def holds_events(self, scope: Scope) -> bool:
        return scope in self._event_scopes

    def candidate(self, scope: Scope, candidate_id: str) -> CandidateRow | None:
        row = self._candidates.get(candidate_id)
        return row if row is not None and row.scope == scope else None

    def updates_stored_candidate(self, candidate_id: str) -> bool:
        """An update is held for a candidate this log did not insert: only the database plus it knows the row."""
        return candidate_id in self._updated

    def record(self, scope: Scope, record_id: str) -> RecordRow | None:
        row = self._records.get(record_id)
        return row if row is not None and row.scope == scope else None

    def record_by_digest(self, scope: Scope, payload_digest: str, state: str) -> str | None:
        """The first held record of the scope with this digest and state (held rows get the larger rids)."""
        return self._digests.get((scope, payload_digest, state))

    def body(self, owner_id: str) -> tuple[bool, SealedBody | None]:
        """(whether this log knows the body, the body or None when it was discarded here)."""
        if owner_id in self._bodies:
            return True, self._bodies[owner_id]
        return False, None

    def idempotency(self, scope: Scope, principal: str, key: str) -> IdempotencyRow | None:
        return self._keys.get((scope, principal, key))


def updated_candidate(row: CandidateRow, update: CandidateUpdate) -> CandidateRow:
    return replace(
        row,
        state=update.state,
        adjudication=update.adjudication,
        record_id=update.record_id,
        review_reasons=update.review_reasons,
    )


def merged_bodies(
    held: Mapping[str, tuple[bool, SealedBody | None]], stored: Mapping[str, SealedBody]
) -> dict[str, SealedBody]:
    """A read of several bodies: what this log knows wins over what the database said."""
    bodies = dict(stored)
    for owner_id, (known, body) in held.items():
        if known:
            if body is None:
                bodies.pop(owner_id, None)
            else:
                bodies[owner_id] = body
    return bodies
