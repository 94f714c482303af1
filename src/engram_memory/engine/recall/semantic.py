"""The semantic channel: embeddings written at admission, per-scope matrices in memory, cosine top-k.

Only accepted_current records are embedded (never a pending candidate), and a record's vector leaves
with its lexical entry. Each record has one vector, by the channel's one model (semantic_models.py).
A scope's matrix is rebuilt from the store when the scope's records cursor (its write generation)
moves, so a search never sees a vector the store no longer holds.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from engram_memory.contract.errors import ContractError
from engram_memory.engine.ports.store import Scope, StoredVector, StoreTx
from engram_memory.engine.recall.semantic_models import Embedder, Matrix, SemanticModel
from engram_memory.engine.recall.text import subject, tokenize

__all__ = [
    "SEMANTIC_POOL",
    "CatchUp",
    "Embedded",
    "Embedder",
    "Matrix",
    "Neighbour",
    "ScopeMatrix",
    "VectorCache",
    "embed_record",
    "embedding_texts",
    "from_bytes",
    "index_vector",
    "semantic_query",
    "subject_of",
    "to_bytes",
]

# How many nearest records a model's list hands to fusion (RRF gives rank 150 a weight of 1/210, which cannot
# lift a record past one the lexical channel also found near the top); tuned on the LoCoMo dev set.
SEMANTIC_POOL = 150
# How many context lines are read (the cap bounds the model work one admission can cause); how much they
# weigh is the model's (semantic_models.py).
CONTEXT_LINES = 8
# Line embeddings kept per engine so repeated context costs no model pass (384 floats each: 6 MB).
TEXT_CACHE_ENTRIES = 4096


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


_OPEN = np.iinfo(np.int64).max


@dataclass(frozen=True, slots=True)
class Neighbour:
    record_id: str
    score: float  # the cosine, rounded to 6 decimals
    valid_from_ms: int
    subject: str


@dataclass(frozen=True, slots=True)
class ScopeMatrix:
    """A scope's vectors at one generation, in record-id order, and what was embedded to build them."""

    generation: int
    ids: tuple[str, ...]
    subjects: tuple[str, ...]
    matrix: Matrix
    valid_from: npt.NDArray[np.int64]
    valid_to: npt.NDArray[np.int64]  # int64 max when open-ended
    expires: npt.NDArray[np.int64]  # int64 max when never
    embedded: tuple[Embedded, ...] = ()

    @classmethod
    def of(
        cls, generation: int, stored: list[StoredVector], dimension: int, embedded: tuple[Embedded, ...]
    ) -> ScopeMatrix:
        stored = sorted(stored, key=lambda row: row.record_id)  # one order whatever the store's row ids
        return cls(
            generation=generation,
            ids=tuple(row.record_id for row in stored),
            subjects=tuple(row.subject for row in stored),
            matrix=(
                np.vstack([from_bytes(row.vector, dimension) for row in stored])
                if stored
                else np.zeros((0, dimension), dtype=np.float32)
            ),
            valid_from=np.array([row.valid_from_ms for row in stored], dtype=np.int64),
            valid_to=np.array(
                [_OPEN if row.valid_to_ms is None else row.valid_to_ms for row in stored], dtype=np.int64
            ),
            expires=np.array(
                [_OPEN if row.expires_at_ms is None else row.expires_at_ms for row in stored], dtype=np.int64
            ),
            embedded=embedded,
        )

    def _eligible(self, valid_at_ms: int) -> npt.NDArray[np.intp]:
        held = (self.valid_from <= valid_at_ms) & (valid_at_ms <= self.valid_to) & (self.expires > valid_at_ms)
        return np.flatnonzero(held)

    def eligible(self, valid_at_ms: int) -> int:
        return int(self._eligible(valid_at_ms).size)

    def nearest(self, query: Matrix, *, valid_at_ms: int, limit: int) -> list[Neighbour]:
        """The `limit` eligible records closest to the query, best first (ties by id); cosines rounded so
        float noise below 1e-6 cannot reorder two records between identical searches."""
        positions = self._eligible(valid_at_ms)
        if positions.size == 0:
            return []
        scores = np.round((self.matrix[positions] @ query).astype(np.float64), 6)
        take = min(limit, positions.size)
        top = np.argpartition(-scores, take - 1)[:take] if take < positions.size else np.arange(positions.size)
        found = sorted(
            ((float(scores[i]), self.ids[positions[i]], int(positions[i])) for i in top), key=lambda f: (-f[0], f[1])
        )
        return [
            Neighbour(record_id, score, int(self.valid_from[at]), self.subjects[at]) for score, record_id, at in found
        ]


@dataclass(frozen=True, slots=True)
class Embedded:
    """A record's vector, the id of the model arrangement that wrote it, and its subject, ready to be written."""

    record_id: str
    vector_id: str
    vector: Matrix
    subject: str


@dataclass(frozen=True, slots=True)
class CatchUp:
    """What a matrix build needs to embed the scope's records that have no vector yet."""

    expected: int  # accepted_current records in the scope (the lexical index's document count)
    payload_of: Callable[[str], Mapping[str, Any]]


def embed_record(cache: VectorCache, scope: Scope, record_id: str, payload: Mapping[str, Any]) -> Embedded:
    model = cache.model
    primary, lines = embedding_texts(payload)
    vector = model.memory_vector(lambda texts: cache.embed_texts(scope, texts), primary, lines)
    return Embedded(record_id, model.vector_id, vector, subject_of(payload))


class VectorCache:
    """The channel's model, per-scope matrices keyed by the scope's write generation, and recent texts'
    vectors; shared by the engine's threads."""

    def __init__(self, model: SemanticModel) -> None:
        self._model = model
        self._lock = threading.Lock()
        self._scopes: dict[Scope, ScopeMatrix] = {}
        self._texts: OrderedDict[tuple[Scope, bytes], Matrix] = OrderedDict()

    @property
    def model(self) -> SemanticModel:
        return self._model

    @property
    def vector_id(self) -> str:
        return self._model.vector_id

    def warm(self) -> None:
        """Loads the model now (a benchmark's warm-up; serving loads it on its first use)."""
        self._model.embedder.embed(["warm-up"])

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
            fresh = self._model.embedder.embed([texts[i] for i in missing])
            with self._lock:
                for row, i in enumerate(missing):
                    known[keys[i]] = fresh[row]
                    self._texts[keys[i]] = fresh[row]
                while len(self._texts) > TEXT_CACHE_ENTRIES:
                    self._texts.popitem(last=False)
        return np.vstack([known[key] for key in keys]).astype(np.float32, copy=False)

    def matrix(self, tx: StoreTx, scope: Scope, generation: int, catch_up: CatchUp) -> ScopeMatrix:
        """The scope's matrix at `generation`, embedding first any current record that has no vector by
        this model (admitted but not yet written by the indexer, or by another process, or under another
        model, or lost to a crash), so the order never depends on any of that. `embedded` holds those
        vectors, for the caller to keep."""
        with self._lock:
            cached = self._scopes.get(scope)
        if cached is not None and cached.generation == generation:
            return replace(cached, embedded=())
        vector_id = self.vector_id
        stored = tx.vectors(scope, vector_id)
        fresh: list[Embedded] = []
        if len(stored) < catch_up.expected:
            for row in tx.records_without_vector(scope, (vector_id,)):
                try:
                    payload = catch_up.payload_of(row.record_id)
                except ContractError:  # a body that does not open stays out of this channel, not the search
                    continue
                embedded = embed_record(self, scope, row.record_id, payload)
                fresh.append(embedded)
                stored.append(row.with_vector(to_bytes(embedded.vector), embedded.subject))
        built = ScopeMatrix.of(generation, stored, self._model.embedder.dimension, tuple(fresh))
        with self._lock:
            current = self._scopes.get(scope)
            if current is None or current.generation <= generation:
                self._scopes[scope] = replace(built, embedded=())
        return built


def index_vector(
    cache: VectorCache | None, tx: StoreTx, scope: Scope, record_id: str, payload: Mapping[str, Any]
) -> None:
    """Embeds a record that has just become accepted_current, in the transaction that made it so."""
    if cache is None:
        return
    embedded = embed_record(cache, scope, record_id, payload)
    tx.put_vector(scope, record_id, embedded.vector_id, to_bytes(embedded.vector), embedded.subject)
