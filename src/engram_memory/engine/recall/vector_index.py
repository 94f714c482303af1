"""A scope's vectors in memory, changed by what changed: a search pays for the records written since the
generation it last saw, never for the whole scope (issue 42).

The index is derived data, stamped with the records cursor it reflects and the journal digest at that
cursor. Before each use it is checked against the search's own snapshot: the same journal up to its
stamp means the records that changed since are exactly those whose state cursor lies after it (the store
gives them, `record_changes`), so it catches up by them; any other journal (a restore, a rewritten store)
means it is built again from the store. The store stays the only judge of what is current: a record
enters the index when the store says it became accepted_current and leaves when it says it stopped.

Entries keep the cursor at which they entered and left, so a search whose snapshot is older than the
index (another thread caught it up meanwhile) sees the index as of its own cursor, as long as the
entries that left since have not been compacted away; if they have, it builds a private index from its
snapshot, as every search did before.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from engram_memory.contract.errors import ContractError
from engram_memory.contract.states import RecordState
from engram_memory.engine.ports.agent_tx import JournalTx, VectorsTx
from engram_memory.engine.ports.store import RecordChange, Scope
from engram_memory.engine.recall.graph_requests import GraphRequest, Proposals
from engram_memory.engine.recall.semantic_models import Matrix
from engram_memory.engine.recall.shared_index import ID_WIDTH, Base, Rows, Stamp

__all__ = [
    "CatchUp",
    "Embedded",
    "Neighbour",
    "ScopeIndex",
    "Stamp",
    "build",
    "catch_up",
    "from_bytes",
    "to_bytes",
]

_CURRENT = RecordState.ACCEPTED_CURRENT.value
_TOMBSTONED = RecordState.TOMBSTONED.value
_OPEN = np.iinfo(np.int64).max
INITIAL_CAPACITY = 16  # rows a new index makes room for: most scopes are small, and a process may see many
# Entries that left are kept for older snapshots until they are this share of the index (and at least
# COMPACT_MIN of them), then dropped in one pass.
COMPACT_SHARE = 0.25
COMPACT_MIN = 1024
# Digests of the generations the index was stamped at, kept to recognise an older snapshot of the same
# journal.
STAMPS_KEPT = 64
# Twice the step cosines are rounded to (1e-6): a float32 score this far below another may round equal to it.
ROUNDING_SLACK = 2e-6


@dataclass(frozen=True, slots=True)
class Neighbour:
    record_id: str
    score: float  # the cosine, rounded to 6 decimals
    valid_from_ms: int
    subject: str


def _opt(value: int | None) -> int:
    return _OPEN if value is None else value


class ScopeIndex:
    """One scope's vectors by one model: a growing matrix, each row alive between two cursors.

    Not thread-safe: VectorCache holds the scope's lock around every use.
    """

    def __init__(self, dimension: int, stamp: Stamp, base: Base | None = None) -> None:
        """`base`: the scope's shared files at `stamp` (shared_index.py); the rows here are then only what
        changed since."""
        self._dimension = dimension
        self.base = base
        self._base_left = np.full(0 if base is None else base.rows, _OPEN, dtype=np.int64)
        self._base_live = 0 if base is None else base.rows
        self._stamps: OrderedDict[int, str | None] = OrderedDict({stamp.cursor: stamp.digest})
        self._horizon = stamp.cursor  # entries that left at or before this cursor may be gone
        self._size = 0
        self._left = 0
        self._ids: list[str] = []
        self._subjects: list[str] = []
        self._row_of: dict[str, int] = {}  # record id -> its live row
        self._matrix: Matrix = np.zeros((0, dimension), dtype=np.float32)
        self._valid_from = self._valid_to = self._expires = self._entered = self._left_at = np.zeros(0, dtype=np.int64)
        self._version = 0  # moves with every change of the rows, for _held's memo
        self._held_memo: tuple[tuple[int, int, int], npt.NDArray[np.bool_]] | None = None
        self._base_memo: tuple[tuple[int, int | None, int], npt.NDArray[np.bool_]] | None = None
        self._reserve(INITIAL_CAPACITY)

    @property
    def stamp(self) -> Stamp:
        cursor = next(reversed(self._stamps))
        return Stamp(cursor, self._stamps[cursor])

    @property
    def state(self) -> tuple[int, Stamp, Base | None]:
        """What moves whenever the index changes at all: where it is equal, so is every answer it gives."""
        return (self._version, self.stamp, self.base)

    def __len__(self) -> int:
        return len(self._row_of) + self._base_live

    @property
    def changed_since_base(self) -> int:
        """Rows held here beside the base (all of them without one)."""
        return self._size

    @property
    def capacity(self) -> int:
        """Rows it holds memory for (live, left, and room to grow)."""
        return int(self._matrix.shape[0])

    def serves(self, tx: JournalTx, scope: Scope, generation: int) -> bool:
        """Whether the index can answer for the snapshot at `generation`: caught up to it (the journal
        still the one it was built from), or ahead of it on that journal with what left since kept."""
        stamp = self.stamp
        if generation >= stamp.cursor:
            return stamp.holds(tx, scope)
        if generation < self._horizon or generation not in self._stamps:
            return False
        return Stamp(generation, self._stamps[generation]).holds(tx, scope)

    def put(
        self, record_id: str, vector: Matrix, subject: str, validity: tuple[int, int | None, int | None], at: int
    ) -> None:
        """The record is current from cursor `at` on (a row it had before leaves there)."""
        self.drop(record_id, at)
        if self._size == self._matrix.shape[0]:
            self._grow()
        row = self._size
        self._matrix[row] = vector
        self._ids.append(record_id)
        self._subjects.append(subject)
        valid_from, valid_to, expires = validity
        self._valid_from[row], self._valid_to[row], self._expires[row] = valid_from, _opt(valid_to), _opt(expires)
        self._entered[row], self._left_at[row] = at, _OPEN
        self._row_of[record_id] = row
        self._size += 1
        self._version += 1

    def drop(self, record_id: str, at: int) -> None:
        """The record stopped being current at cursor `at`."""
        row = self._row_of.pop(record_id, None)
        if row is not None:
            self._left_at[row] = at
            self._left += 1
            self._version += 1
            return
        if self.base is not None:
            base_row = self.base.row_of(record_id)
            if base_row is not None and self._base_left[base_row] == _OPEN:
                self._base_left[base_row] = at
                self._base_live -= 1
                self._version += 1

    def stamped(self, stamp: Stamp) -> None:
        self._stamps[stamp.cursor] = stamp.digest
        while len(self._stamps) > STAMPS_KEPT:
            self._stamps.popitem(last=False)
        if self._left >= COMPACT_MIN and self._left >= COMPACT_SHARE * self._size:
            self._compact()

    _COLUMNS = ("_valid_from", "_valid_to", "_expires", "_entered", "_left_at")

    def _reserve(self, capacity: int, rows: npt.NDArray[np.intp] | None = None) -> None:
        """Room for `capacity` rows, keeping the first `_size` rows (or only `rows`, in order)."""
        keep = np.arange(self._size) if rows is None else rows
        matrix = np.zeros((capacity, self._dimension), dtype=np.float32)
        matrix[: keep.size] = self._matrix[keep]
        self._matrix = matrix
        for name in self._COLUMNS:
            column = np.zeros(capacity, dtype=np.int64)
            column[: keep.size] = getattr(self, name)[keep]
            setattr(self, name, column)

    def _grow(self) -> None:
        self._reserve(2 * self._matrix.shape[0])

    def _compact(self) -> None:
        """Drops the rows that left; older snapshots than the current stamp can no longer be served."""
        keep = np.flatnonzero(self._left_at[: self._size] == _OPEN)
        self._horizon = self.stamp.cursor
        self._reserve(max(INITIAL_CAPACITY, 2 * keep.size), keep)
        self._ids = [self._ids[row] for row in keep]
        self._subjects = [self._subjects[row] for row in keep]
        self._size, self._left = int(keep.size), 0
        self._version += 1
        self._row_of = {record_id: row for row, record_id in enumerate(self._ids)}

    def _held(self, generation: int, valid_at_ms: int) -> npt.NDArray[np.bool_]:
        """Which of the first `_size` rows the snapshot sees, valid and unexpired at `valid_at_ms` (the last
        answer is kept: a search asks for the count, then for the nearest, of the same snapshot)."""
        key = (generation, valid_at_ms, self._version)
        if self._held_memo is not None and self._held_memo[0] == key:
            return self._held_memo[1]
        n = self._size
        alive = (self._entered[:n] <= generation) & (generation < self._left_at[:n])
        valid = (self._valid_from[:n] <= valid_at_ms) & (valid_at_ms <= self._valid_to[:n])
        held: npt.NDArray[np.bool_] = alive & valid & (self._expires[:n] > valid_at_ms)
        self._held_memo = (key, held)
        return held

    def _base_held(self, generation: int, valid_at_ms: int) -> npt.NDArray[np.bool_]:
        """As _held, for the base's rows (all entered at or before its stamp)."""
        base = self.base
        assert base is not None
        every_valid = base.valid_throughout[0] <= valid_at_ms <= base.valid_throughout[1]  # the columns need no look
        key = (generation, None if every_valid else valid_at_ms, self._version)
        if self._base_memo is not None and self._base_memo[0] == key:
            return self._base_memo[1]
        held: npt.NDArray[np.bool_] = generation < self._base_left
        if not every_valid:
            held &= (base.valid_from <= valid_at_ms) & (valid_at_ms <= base.valid_to) & (base.expires > valid_at_ms)
        self._base_memo = (key, held)
        return held

    def eligible(self, generation: int, valid_at_ms: int) -> int:
        count = int(np.count_nonzero(self._held(generation, valid_at_ms)))
        if self.base is not None:
            count += int(np.count_nonzero(self._base_held(generation, valid_at_ms)))
        return count

    def graph_request(self, generation: int, valid_at_ms: int, limit: int) -> GraphRequest | None:
        """What `nearest` would ask the base's graph for this snapshot (None without a base), for the
        graph to be searched off the scope's lock while the caller does other work."""
        if self.base is None:
            return None
        held = self._base_held(generation, valid_at_ms)
        k = min(limit, int(np.count_nonzero(held)))
        return GraphRequest(self.base, self._version, (generation, valid_at_ms), held, k)

    def nearest(
        self,
        query: Matrix,
        *,
        generation: int,
        valid_at_ms: int,
        limit: int,
        proposals: Proposals | None = None,
        own: list[_Found] | None = None,
    ) -> list[Neighbour]:
        """The `limit` records eligible at the snapshot's generation and valid time closest to the query,
        best first, ties by id; cosines rounded so float noise below 1e-6 cannot reorder two records
        between identical searches. Every row is scored in place (a slice, no copy of the matrix); only
        the rows that can reach the first `limit` once rounded are rounded and sorted. With a base, its
        graph proposes its best rows, scored the same way from the base's float32 vectors; `proposals`
        found for this very request (same base, snapshot and index state) stand in for asking again, and
        `own`, what own_nearest answered for this snapshot in this index state, for scoring them again."""
        found = list(own) if own is not None else self.own_nearest(query, generation, valid_at_ms, limit)
        if self.base is not None:
            found.extend(self._from_base(query, generation, valid_at_ms, limit, proposals))
        found.sort(key=lambda f: (-f[0], f[1]))
        return [
            Neighbour(record_id, score, valid_from, subject) for score, record_id, valid_from, subject in found[:limit]
        ]

    def own_nearest(self, query: Matrix, generation: int, valid_at_ms: int, limit: int) -> list[_Found]:
        """The candidates among the rows outside the base, scored exactly (nearest's first half)."""
        held = self._held(generation, valid_at_ms)
        count = int(np.count_nonzero(held))
        if count == 0:
            return []
        scores = self._matrix[: self._size] @ query
        scores[~held] = -np.inf
        take = min(limit, count)
        if take < scores.size:
            kth = float(np.partition(scores, scores.size - take)[scores.size - take])
            # A row below the take-th score by less than the rounding step may round to the same cosine
            # and win the tie on its id.
            rows = np.flatnonzero(scores >= kth - ROUNDING_SLACK)
        else:
            rows = np.flatnonzero(held)
        rounded = np.round(scores[rows].astype(np.float64), 6)
        return [
            (float(score), self._ids[row], int(self._valid_from[row]), self._subjects[row])
            for score, row in zip(rounded, rows, strict=True)
        ]

    def _from_base(
        self, query: Matrix, generation: int, valid_at_ms: int, limit: int, proposals: Proposals | None
    ) -> list[_Found]:
        request = self.graph_request(generation, valid_at_ms, limit)
        assert request is not None
        base = request.base
        if proposals is None or not proposals.request.asks_as(request):
            proposals = request.propose(query)
        rows = np.asarray(sorted(proposals.rows), dtype=np.intp)
        if rows.size == 0:
            return []
        rounded = np.round((base.vectors_of(rows) @ query).astype(np.float64), 6)  # as own_nearest scores its rows
        return [
            (float(score), base.record_id(int(row)), int(base.valid_from[row]), base.subject(int(row)))
            for score, row in zip(rounded, rows, strict=True)
        ]

    def live_rows(self) -> Rows:
        """The rows current at the index's stamp (the base's that did not leave, and its own), copied:
        what a new base is written from."""
        stamp = self.stamp
        own = np.flatnonzero(self._left_at[: self._size] == _OPEN)
        ids = [self._ids[row].encode("ascii") for row in own]
        vectors = [self._matrix[own]]
        subjects = [self._subjects[row] for row in own]
        columns = [getattr(self, name)[own] for name in ("_valid_from", "_valid_to", "_expires")]
        base = self.base
        if base is not None:
            kept = np.flatnonzero(self._base_left == _OPEN)
            ids.extend(bytes(base.ids[row]) for row in kept)
            vectors.append(base.copied_vectors(kept))
            subjects.extend(base.subject(int(row)) for row in kept)
            columns = [
                np.concatenate([mine, np.asarray(theirs[kept])])
                for mine, theirs in zip(columns, (base.valid_from, base.valid_to, base.expires), strict=True)
            ]
        return Rows(
            stamp,
            np.array(ids, dtype=f"S{ID_WIDTH}"),
            np.concatenate(vectors).astype(np.float32, copy=False),
            subjects,
            *columns,
        )


_Found = tuple[float, str, int, str]  # (cosine, record id, valid from, subject)


@dataclass(frozen=True, slots=True)
class Embedded:
    """A record's vector, the id of the model arrangement that wrote it, and its subject, ready to be written."""

    record_id: str
    vector_id: str
    vector: Matrix
    subject: str


Embed = Callable[[str, Mapping[str, Any]], Embedded]


@dataclass(frozen=True, slots=True)
class CatchUp:
    """What an index needs to embed the records that have no vector yet: their bodies, and the model."""

    payload_of: Callable[[str], Mapping[str, Any]]
    embed: Embed


def _embed(catch_up: CatchUp, record_id: str, fresh: list[Embedded]) -> Embedded | None:
    try:
        payload = catch_up.payload_of(record_id)
    except ContractError:  # a body that does not open stays out of this channel, not the search
        return None
    embedded = catch_up.embed(record_id, payload)
    fresh.append(embedded)
    return embedded


def to_bytes(vector: Matrix) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def from_bytes(data: bytes, dimension: int) -> Matrix:
    vector = np.frombuffer(data, dtype="<f4")
    if vector.shape != (dimension,):
        raise ValueError("a stored vector has another dimension than the model")
    return vector


class VectorIndexTx(JournalTx, VectorsTx, Protocol):
    """The scope's embeddings, read as of its journal's head."""


def build(
    tx: VectorIndexTx, scope: Scope, generation: int, vector_id: str, dimension: int, catch_up: CatchUp
) -> tuple[ScopeIndex, list[Embedded]]:
    """The scope's index at `generation`, from every vector the store holds, embedding the current records
    that have none (admitted but not yet written by an indexer, lost to a crash, or under another model)."""
    index = ScopeIndex(dimension, Stamp.read(tx, scope, generation))
    fresh: list[Embedded] = []
    for row in sorted(tx.vectors(scope, vector_id), key=lambda row: row.record_id):
        index.put(
            row.record_id,
            from_bytes(row.vector, dimension),
            row.subject,
            (row.valid_from_ms, row.valid_to_ms, row.expires_at_ms),
            0,
        )
    for missing in tx.records_without_vector(scope, (vector_id,)):
        embedded = _embed(catch_up, missing.record_id, fresh)
        if embedded is not None:
            validity = (missing.valid_from_ms, missing.valid_to_ms, missing.expires_at_ms)
            index.put(missing.record_id, embedded.vector, embedded.subject, validity, 0)
    return index, fresh


def catch_up(
    index: ScopeIndex,
    tx: VectorIndexTx,
    scope: Scope,
    generation: int,
    vector_id: str,
    dimension: int,
    embedding: CatchUp,
    forgotten: list[str] | None = None,
) -> list[Embedded]:
    """Brings the index from its stamp to `generation` by the records that changed in between; the
    records of its base that were forgotten meanwhile are added to `forgotten` (their vectors must leave
    the base's files)."""
    fresh: list[Embedded] = []
    after = index.stamp.cursor
    if generation > after:
        for change in tx.record_changes(scope, after, generation, vector_id):
            _apply(index, change, dimension, embedding, fresh)
            if (
                forgotten is not None
                and change.state == _TOMBSTONED
                and index.base is not None
                and index.base.still_holds(change.record_id)
            ):
                forgotten.append(change.record_id)
        index.stamped(Stamp.read(tx, scope, generation))
    return fresh


def _apply(index: ScopeIndex, change: RecordChange, dimension: int, embedding: CatchUp, fresh: list[Embedded]) -> None:
    if change.state != _CURRENT:
        index.drop(change.record_id, change.state_cursor)
        return
    validity = (change.valid_from_ms, change.valid_to_ms, change.expires_at_ms)
    if change.vector is not None:
        index.put(
            change.record_id, from_bytes(change.vector, dimension), change.subject or "", validity, change.state_cursor
        )
        return
    embedded = _embed(embedding, change.record_id, fresh)
    if embedded is not None:
        index.put(change.record_id, embedded.vector, embedded.subject, validity, change.state_cursor)
