"""The semantic channel: embeddings written at admission, a per-scope matrix in memory, cosine top-k.

Only accepted_current records are embedded (never a pending candidate), and a record's vector leaves
with its lexical entry. The matrix of a scope is rebuilt from the store when the scope's records
cursor (its write generation) moves, so a search never sees a vector the store no longer holds.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from engram_memory.engine.ports import Scope, StoreTx
from engram_memory.engine.text import tokenize

__all__ = [
    "SEMANTIC_POOL",
    "Embedder",
    "Matrix",
    "Neighbour",
    "VectorCache",
    "embedding_texts",
    "from_bytes",
    "index_vector",
    "memory_vector",
    "semantic_query",
    "subject_of",
    "to_bytes",
]

Matrix = npt.NDArray[np.float32]

# How many nearest records the channel hands to fusion (RRF gives rank 150 a weight of 1/210, which cannot
# lift a record past one the lexical channel also found near the top); tuned on the LoCoMo dev set.
SEMANTIC_POOL = 150


class Embedder(Protocol):
    """A local sentence-embedding model. Vectors are float32 and unit length, so a dot product is the cosine."""

    @property
    def model_id(self) -> str: ...
    @property
    def model_version(self) -> str: ...
    @property
    def dimension(self) -> int: ...
    def embed(self, texts: Sequence[str]) -> Matrix: ...


def _primary_text(payload: Mapping[str, Any]) -> str:
    primary_id = payload["primary_component_id"]
    return "\n".join(c["text"] for c in payload["components"] if c["component_id"] == primary_id)


def embedding_texts(payload: Mapping[str, Any]) -> list[str]:
    """What the model reads of a memory: its primary component, and the other components followed by it.

    A memory's vector is the mean of the two (renormalised): the statement alone keeps its own meaning
    sharp, the statement in its surroundings carries the topic a short reply leaves out. Measured on
    the LoCoMo dev set, the mean beats either text alone.
    """
    primary = _primary_text(payload)
    primary_id = payload["primary_component_id"]
    others = [c["text"] for c in payload["components"] if c["component_id"] != primary_id]
    return [primary, "\n".join([*others, primary])] if others else [primary]


def memory_vector(embedder: Embedder, payload: Mapping[str, Any]) -> Matrix:
    vectors = embedder.embed(embedding_texts(payload))
    mean = vectors.mean(axis=0)
    norm = float(np.linalg.norm(mean))
    unit: Matrix = np.asarray(mean / norm if norm > 0 else mean, dtype=np.float32)
    return unit


_WORD = re.compile(r"\w+(?:['\u2019]\w+)*")


def semantic_query(query: str, frequent: frozenset[str]) -> str:
    """The query as the model reads it: without the words whose index terms are frequent in the scope
    (and their possessive), unless that would leave nothing."""
    if not frequent:
        return query
    kept = []
    for match in _WORD.finditer(query):
        word = re.sub(r"['\u2019]s$", "", match.group(0), flags=re.IGNORECASE)
        terms = tokenize(word)
        if terms and all(term in frequent for term in terms):
            continue
        kept.append(match.group(0))
    return " ".join(kept) if kept else query


def subject_of(payload: Mapping[str, Any]) -> str:
    """The first index token of the primary text: whom or what the memory is about ("Caroline: ...")."""
    tokens = tokenize(_primary_text(payload))
    return tokens[0] if tokens else ""


def to_bytes(vector: Matrix) -> bytes:
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def from_bytes(data: bytes, dimension: int) -> Matrix:
    vector = np.frombuffer(data, dtype="<f4")
    if vector.shape != (dimension,):
        raise ValueError("a stored vector has another dimension than the model")
    return vector


@dataclass(frozen=True, slots=True)
class _ScopeMatrix:
    generation: int
    ids: tuple[str, ...]
    subjects: tuple[str, ...]
    matrix: Matrix
    valid_from: npt.NDArray[np.int64]
    valid_to: npt.NDArray[np.int64]  # int64 max when open-ended
    expires: npt.NDArray[np.int64]  # int64 max when never


_OPEN = np.iinfo(np.int64).max


@dataclass(frozen=True, slots=True)
class Neighbour:
    record_id: str
    cosine: float
    valid_from_ms: int
    subject: str


class VectorCache:
    """Per-scope matrices keyed by the scope's write generation; shared by the engine's threads."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._lock = threading.Lock()
        self._scopes: dict[Scope, _ScopeMatrix] = {}

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    def _matrix(self, tx: StoreTx, scope: Scope, generation: int) -> _ScopeMatrix:
        with self._lock:
            cached = self._scopes.get(scope)
        if cached is not None and cached.generation == generation:
            return cached
        stored = tx.vectors(scope, self._embedder.model_id)
        dimension = self._embedder.dimension
        matrix = (
            np.vstack([from_bytes(row.vector, dimension) for row in stored])
            if stored
            else np.zeros((0, dimension), dtype=np.float32)
        )
        built = _ScopeMatrix(
            generation=generation,
            ids=tuple(row.record_id for row in stored),
            subjects=tuple(row.subject for row in stored),
            matrix=matrix,
            valid_from=np.array([row.valid_from_ms for row in stored], dtype=np.int64),
            valid_to=np.array(
                [_OPEN if row.valid_to_ms is None else row.valid_to_ms for row in stored], dtype=np.int64
            ),
            expires=np.array(
                [_OPEN if row.expires_at_ms is None else row.expires_at_ms for row in stored], dtype=np.int64
            ),
        )
        with self._lock:
            current = self._scopes.get(scope)
            if current is None or current.generation <= generation:
                self._scopes[scope] = built
        return built

    def nearest(
        self, tx: StoreTx, scope: Scope, generation: int, query: Matrix, *, valid_at_ms: int, limit: int
    ) -> tuple[list[Neighbour], int]:
        """The `limit` eligible records closest to the query, best first (ties by id), and how many records
        were eligible."""
        built = self._matrix(tx, scope, generation)
        if not built.ids:
            return [], 0
        eligible = (built.valid_from <= valid_at_ms) & (valid_at_ms <= built.valid_to) & (built.expires > valid_at_ms)
        positions = np.flatnonzero(eligible)
        if positions.size == 0:
            return [], 0
        scores = built.matrix[positions] @ query
        # Rounded so float noise below 1e-6 cannot reorder two records between identical searches.
        rounded = np.round(scores.astype(np.float64), 6)
        take = min(limit, positions.size)
        top = np.argpartition(-rounded, take - 1)[:take] if take < positions.size else np.arange(positions.size)
        best = sorted(((float(rounded[i]), int(positions[i])) for i in top), key=lambda p: (-p[0], built.ids[p[1]]))
        neighbours = [
            Neighbour(built.ids[at], score, int(built.valid_from[at]), built.subjects[at]) for score, at in best
        ]
        return neighbours, int(positions.size)


def index_vector(
    cache: VectorCache | None, tx: StoreTx, scope: Scope, record_id: str, payload: Mapping[str, Any]
) -> None:
    """Embeds a record that has just become accepted_current, in the transaction that made it so."""
    if cache is None:
        return
    vector = memory_vector(cache.embedder, payload)
    tx.put_vector(scope, record_id, cache.embedder.model_id, to_bytes(vector), subject_of(payload))
