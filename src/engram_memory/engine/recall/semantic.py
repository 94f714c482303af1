"""The semantic channel: embeddings written at admission, a per-scope matrix in memory, cosine top-k.

Only accepted_current records are embedded (never a pending candidate), and a record's vector leaves
with its lexical entry. The matrix of a scope is rebuilt from the store when the scope's records
cursor (its write generation) moves, so a search never sees a vector the store no longer holds.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from engram_memory.contract.errors import ContractError
from engram_memory.engine.ports.store import Scope, StoreTx
from engram_memory.engine.recall.text import subject, tokenize

__all__ = [
    "SEMANTIC_POOL",
    "CatchUp",
    "Embedded",
    "Embedder",
    "Matrix",
    "Nearest",
    "Neighbour",
    "VectorCache",
    "embed_record",
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
# How much a memory's context lines weigh in its vector, and how many of them are read (the line cap
# bounds the model work one admission can cause). With multilingual-e5 the context helps a short
# conversational turn and blurs a self-contained sentence: dense-only R@10 with weight 0.7 / 0 was 73.9 /
# 72.1 on LoCoMo (English), 90.9 / 94.0 (Japanese), 95.3 / 97.1 (Traditional Chinese); 0.2 keeps most
# of either gain in fusion (docs/decisions/0014-multilingual-model.md).
CONTEXT_WEIGHT = 0.2
CONTEXT_LINES = 8
# Line embeddings kept per engine so repeated context costs no model pass (384 floats each: 6 MB).
TEXT_CACHE_ENTRIES = 4096


class Embedder(Protocol):
    """A local sentence-embedding model. Vectors are float32 and unit length, so a dot product is the cosine."""

    @property
    def model_id(self) -> str: ...
    @property
    def model_version(self) -> str: ...
    @property
    def dimension(self) -> int: ...
    def embed(self, texts: Sequence[str]) -> Matrix:
        """Vectors of memories' texts."""
        ...

    def embed_queries(self, texts: Sequence[str]) -> Matrix:
        """Vectors of search queries (models trained with a query prefix, like e5, use it here)."""
        ...


def _primary_text(payload: Mapping[str, Any]) -> str:
    primary_id = payload["primary_component_id"]
    return "\n".join(c["text"] for c in payload["components"] if c["component_id"] == primary_id)


def embedding_texts(payload: Mapping[str, Any]) -> tuple[str, list[str]]:
    """What the model reads of a memory: its primary component, and each line of its other components
    (the last CONTEXT_LINES of them, the nearest ones when the context runs in time order)."""
    primary = _primary_text(payload)
    primary_id = payload["primary_component_id"]
    lines = [
        line.strip()
        for component in payload["components"]
        if component["component_id"] != primary_id
        for line in component["text"].split("\n")
        if line.strip()
    ]
    return primary, lines[-CONTEXT_LINES:] if lines else []


def _unit(vector: Matrix) -> Matrix:
    norm = float(np.linalg.norm(vector))
    unit: Matrix = np.asarray(vector / norm if norm > 0 else vector, dtype=np.float32)
    return unit


def memory_vector(embed: Callable[[Sequence[str]], Matrix], payload: Mapping[str, Any]) -> Matrix:
    """The primary text's embedding plus CONTEXT_WEIGHT times the unit mean of its context lines' embeddings.

    The statement alone keeps its own meaning sharp; its surroundings carry the topic a short reply
    ("Wow, that's great!") leaves out. Lines are embedded one by one so that a line already seen (a
    conversation's previous turn is the next turn's context) comes from the cache instead of the model:
    one model pass per memory instead of two. Measured on the LoCoMo dev set it ranks as well as
    embedding the context and the statement together.
    """
    primary, lines = embedding_texts(payload)
    vectors = embed([primary, *lines])
    if not lines:
        return _unit(vectors[0])
    return _unit(vectors[0] + CONTEXT_WEIGHT * _unit(vectors[1:].mean(axis=0)))


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
    """Whom or what the memory is about ("Caroline: ..."): engine/recall/text.py subject."""
    return subject(tokenize(_primary_text(payload)))


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
class Embedded:
    """A record's vector and subject, ready to be written."""

    record_id: str
    vector: Matrix
    subject: str


def embed_record(cache: VectorCache, scope: Scope, record_id: str, payload: Mapping[str, Any]) -> Embedded:
    return Embedded(
        record_id, memory_vector(lambda texts: cache.embed_texts(scope, texts), payload), subject_of(payload)
    )


@dataclass(frozen=True, slots=True)
class Neighbour:
    record_id: str
    cosine: float
    valid_from_ms: int
    subject: str


@dataclass(frozen=True, slots=True)
class CatchUp:
    """What a matrix build needs to embed the scope's records that have no vector yet."""

    expected: int  # accepted_current records in the scope (the lexical index's document count)
    payload_of: Callable[[str], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Nearest:
    neighbours: list[Neighbour]
    eligible: int
    embedded: list[Embedded]


class VectorCache:
    """Per-scope matrices keyed by the scope's write generation; shared by the engine's threads."""

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder
        self._lock = threading.Lock()
        self._scopes: dict[Scope, _ScopeMatrix] = {}
        self._texts: OrderedDict[tuple[Scope, bytes], Matrix] = OrderedDict()

    @property
    def embedder(self) -> Embedder:
        return self._embedder

    def embed_texts(self, scope: Scope, texts: Sequence[str]) -> Matrix:
        """The model's vectors for `texts`, from the scope's recent-text cache where it has them.

        Keyed by a digest, so no plaintext stays in memory; kept per scope, so one tenant's texts never
        answer for another's.
        """
        keys = [(scope, hashlib.sha256(text.encode("utf-8")).digest()) for text in texts]
        with self._lock:
            known = {key: self._texts[key] for key in keys if key in self._texts}
            for key in known:
                self._texts.move_to_end(key)
        missing = list(dict.fromkeys(i for i, key in enumerate(keys) if key not in known))
        if missing:
            fresh = self._embedder.embed([texts[i] for i in missing])
            with self._lock:
                for row, i in enumerate(missing):
                    known[keys[i]] = fresh[row]
                    self._texts[keys[i]] = fresh[row]
                while len(self._texts) > TEXT_CACHE_ENTRIES:
                    self._texts.popitem(last=False)
        return np.vstack([known[key] for key in keys]).astype(np.float32, copy=False)

    def _matrix(
        self, tx: StoreTx, scope: Scope, generation: int, catch_up: CatchUp
    ) -> tuple[_ScopeMatrix, list[Embedded]]:
        with self._lock:
            cached = self._scopes.get(scope)
        if cached is not None and cached.generation == generation:
            return cached, []
        model = self._embedder.model_id
        stored = tx.vectors(scope, model)
        fresh: list[Embedded] = []
        if len(stored) < catch_up.expected:
            # Admitted here but not yet written by the indexer, or by another process, or under another
            # model, or lost to a crash: embedded now, so the order never depends on any of that.
            for row in tx.records_without_vector(scope, model):
                try:
                    payload = catch_up.payload_of(row.record_id)
                except ContractError:  # a body that does not open stays out of this channel, not the search
                    continue
                embedded = embed_record(self, scope, row.record_id, payload)
                fresh.append(embedded)
                stored.append(row.with_vector(to_bytes(embedded.vector), embedded.subject))
        stored.sort(key=lambda row: row.record_id)  # one order whatever the store's row ids
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
        return built, fresh

    def nearest(
        self,
        tx: StoreTx,
        scope: Scope,
        generation: int,
        query: Matrix,
        *,
        valid_at_ms: int,
        limit: int,
        catch_up: CatchUp,
    ) -> Nearest:
        """The `limit` eligible records closest to the query, best first (ties by id), how many records
        were eligible, and the vectors embedded on the way (for the caller to keep)."""
        built, fresh = self._matrix(tx, scope, generation, catch_up)
        if not built.ids:
            return Nearest([], 0, fresh)
        eligible = (built.valid_from <= valid_at_ms) & (valid_at_ms <= built.valid_to) & (built.expires > valid_at_ms)
        positions = np.flatnonzero(eligible)
        if positions.size == 0:
            return Nearest([], 0, fresh)
        scores = built.matrix[positions] @ query
        # Rounded so float noise below 1e-6 cannot reorder two records between identical searches.
        rounded = np.round(scores.astype(np.float64), 6)
        take = min(limit, positions.size)
        top = np.argpartition(-rounded, take - 1)[:take] if take < positions.size else np.arange(positions.size)
        best = sorted(((float(rounded[i]), int(positions[i])) for i in top), key=lambda p: (-p[0], built.ids[p[1]]))
        neighbours = [
            Neighbour(built.ids[at], score, int(built.valid_from[at]), built.subjects[at]) for score, at in best
        ]
        return Nearest(neighbours, int(positions.size), fresh)


def index_vector(
    cache: VectorCache | None, tx: StoreTx, scope: Scope, record_id: str, payload: Mapping[str, Any]
) -> None:
    """Embeds a record that has just become accepted_current, in the transaction that made it so."""
    if cache is None:
        return
    embedded = embed_record(cache, scope, record_id, payload)
    tx.put_vector(scope, record_id, cache.embedder.model_id, to_bytes(embedded.vector), embedded.subject)
