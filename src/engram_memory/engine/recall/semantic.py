"""The semantic channel: embeddings written at admission, per-scope indexes (in memory, over a large
scope's shared files), cosine top-k.

Only accepted_current records are embedded (never a pending candidate), and a record's vector leaves
with its lexical entry. Each record has one vector, by the channel's one model (semantic_models.py).
A scope's index follows the store by what changed since the records cursor it last saw
(vector_index.py), so a search never sees a vector of a record the store no longer holds current; a
large scope's index stands on a base every process maps (shared_index.py, shared_builds.py).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from engram_memory.engine.ports.agent_tx import VectorsTx
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.graph_requests import GraphRequest, Proposals
from engram_memory.engine.recall.semantic_models import Embedder, Matrix, SemanticModel
from engram_memory.engine.recall.shared_builds import SharedBases
from engram_memory.engine.recall.shared_index import Base, Stamp
from engram_memory.engine.recall.text import subject, tokenize
from engram_memory.engine.recall.vector_index import (
    CatchUp,
    Embedded,
    Neighbour,
    ScopeIndex,
    VectorIndexTx,
    build,
    catch_up,
    from_bytes,
    to_bytes,
)

PayloadOf = Callable[[str], Mapping[str, Any]]

__all__ = [
    "SEMANTIC_POOL",
    "CatchUp",
    "Embedded",
    "Embedder",
    "Matrix",
    "Neighbour",
    "PayloadOf",
    "SemanticAnswer",
    "VectorCache",
    "embed_record",
    "embedding_texts",
    "from_bytes",
    "index_vector",
    "semantic_query",
    "subject_of",
    "to_bytes",
]

# How many nearest records the model's list hands to fusion; tuned on the LoCoMo dev set.
SEMANTIC_POOL = 150
# How many context lines are read (the cap bounds the model work one admission can cause); how much they
# weigh is the model's (semantic_models.py).
CONTEXT_LINES = 8
# Line embeddings kept per engine so repeated context costs no model pass (384 floats each: 6 MB).
TEXT_CACHE_ENTRIES = 4096
# Query vectors kept per engine: an agent asking again, or paging, costs no model pass.
QUERY_CACHE_ENTRIES = 1024
# Threads that run queries through the model and the graph beside the searches that asked (VectorCache.start).
ASKING_THREADS = 4
# Vectors kept in memory across a process's scope indexes (384 float32 each: 1.5 KB, so about 300 MB);
# past it the least recently searched scopes are dropped and built again when asked.
CACHED_VECTORS = 200_000
CACHED_SCOPES = 1024


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


def embed_record(cache: VectorCache, scope: Scope, record_id: str, payload: Mapping[str, Any]) -> Embedded:
    model = cache.model
    primary, lines = embedding_texts(payload)
    vector = model.memory_vector(lambda texts: cache.embed_texts(scope, texts), primary, lines)
    return Embedded(record_id, model.vector_id, vector, subject_of(payload))


@dataclass(frozen=True, slots=True)
class SemanticAnswer:
    """What the semantic channel gives one search: how many records were eligible, the nearest of them,
    and the vectors it had to compute (for the caller to keep)."""

    eligible: int
    nearest: list[Neighbour]
    embedded: tuple[Embedded, ...]


def sequential_blas() -> None:
    """Keeps numpy's BLAS to the calling thread, for the whole process.

    A search scores vectors on one thread while its lexical half reads the store on another. numpy's
    OpenBLAS splits even a one-query product over every core, and its idle workers spin for a while
    after each product: on two cores they took the core the lexical half ran on, and a search over
    100,000 memories took 32 ms at the median instead of 22. The channel's products are a few thousand
    rows by one query: one thread is as fast for them.
    """
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")


class VectorCache:
    """The channel's model, each scope's index (engine/recall/vector_index.py) and recent texts' and
    queries' vectors; shared by the engine's threads, each scope's index under a lock of its own."""

    def __init__(self, model: SemanticModel, shared: SharedBases | None = None) -> None:
        """`shared`: where large scopes' vectors are kept for every process of the host (shared_builds.py);
        None keeps every scope in this process's memory."""
        self._model = model
        self._shared = shared
        self._lock = threading.Lock()
        self._scopes: OrderedDict[Scope, ScopeIndex] = OrderedDict()
        self._scope_locks: dict[Scope, threading.Lock] = {}
        self._texts: OrderedDict[tuple[Scope, bytes], Matrix] = OrderedDict()
        self._queries: OrderedDict[tuple[Scope, bytes], Matrix] = OrderedDict()
        self._asking: ThreadPoolExecutor | None = None
        sequential_blas()

    @property
    def model(self) -> SemanticModel:
        return self._model

    @property
    def shared(self) -> SharedBases | None:
        return self._shared

    @property
    def vector_id(self) -> str:
        return self._model.vector_id

    @property
    def dimension(self) -> int:
        return self._model.embedder.dimension

    def forgotten(self, scope: Scope, record_id: str) -> str:
        """After a forget commits: overwrites the record's vector in the scope's shared files, if they hold
        it ("erased"), else "absent"."""
        shared = self._shared
        base = None if shared is None else shared.current(scope, self.vector_id, self.dimension)
        return "erased" if base is not None and base.erase([record_id]) else "absent"

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

    def query_vector(self, scope: Scope, query: str) -> Matrix:
        """The query's vector, from the scope's recent-query cache when the same text was asked lately."""
        key = (scope, hashlib.sha256(query.encode("utf-8")).digest())
        with self._lock:
            cached = self._queries.get(key)
            if cached is not None:
                self._queries.move_to_end(key)
                return cached
        vector = self._model.query_vector(query)
        with self._lock:
            self._queries[key] = vector
            while len(self._queries) > QUERY_CACHE_ENTRIES:
                self._queries.popitem(last=False)
        return vector

    def _scope_lock(self, scope: Scope) -> threading.Lock:
        with self._lock:
            return self._scope_locks.setdefault(scope, threading.Lock())

    def _catch_up(
        self, tx: VectorIndexTx, scope: Scope, generation: int, payload_of: PayloadOf
    ) -> tuple[ScopeIndex, list[Embedded]]:
        """The scope's shared index, brought to `generation` (or able to answer for it); or, when it cannot
        be (a snapshot older than what it kept), a private one built from the snapshot. Under the scope's lock."""
        embedding = CatchUp(payload_of, lambda record_id, payload: embed_record(self, scope, record_id, payload))
        with self._lock:
            index = self._scopes.get(scope)
            if index is not None:
                self._scopes.move_to_end(scope)
        base = self._base_before(scope, generation)
        if index is not None and index.serves(tx, scope, generation) and not _replaces(base, index):
            return index, self._caught_up(index, tx, scope, generation, embedding)
        if base is not None and base.stamp.holds(tx, scope):
            # A new generation, or a snapshot the index has moved past: caught up from the base.
            adopted = ScopeIndex(self.dimension, base.stamp, base)
            fresh = self._caught_up(adopted, tx, scope, generation, embedding)
            if index is None or generation >= index.stamp.cursor:
                self._keep_index(scope, adopted)
            return adopted, fresh
        built, fresh = build(tx, scope, generation, self.vector_id, self.dimension, embedding)
        if index is None or generation >= index.stamp.cursor:
            self._keep_index(scope, built)
            self._maybe_share(scope, built)
        return built, fresh

    def _base_before(self, scope: Scope, generation: int) -> Base | None:
        """The scope's current shared base if it was written at or before `generation` (whether it was
        written from this journal is checked before it is used)."""
        if self._shared is None:
            return None
        base = self._shared.current(scope, self.vector_id, self.dimension)
        return None if base is None or base.stamp.cursor > generation else base

    def _caught_up(
        self, index: ScopeIndex, tx: VectorIndexTx, scope: Scope, generation: int, embedding: CatchUp
    ) -> list[Embedded]:
        forgotten: list[str] = []
        fresh = catch_up(index, tx, scope, generation, self.vector_id, self.dimension, embedding, forgotten)
        if self._shared is not None:
            if forgotten and index.base is not None:
                index.base.erase(forgotten)  # forgotten through a process that did not erase it
            self._maybe_share(scope, index)
        return fresh

    def _maybe_share(self, scope: Scope, index: ScopeIndex) -> None:
        shared = self._shared
        if shared is not None and shared.wants_base(len(index), index.changed_since_base, index.base):
            shared.build(scope, self.vector_id, index.base, len(index), index.live_rows)

    def _keep_index(self, scope: Scope, index: ScopeIndex) -> None:
        with self._lock:
            self._scopes[scope] = index
            self._scopes.move_to_end(scope)
            self._evict(keep=scope)

    def _evict(self, keep: Scope) -> None:
        """Drops the least recently searched scopes' indexes past CACHED_VECTORS rows of memory or
        CACHED_SCOPES scopes (each is built again when asked); `keep` stays."""
        total = sum(index.capacity for index in self._scopes.values())
        while (total > CACHED_VECTORS or len(self._scopes) > CACHED_SCOPES) and len(self._scopes) > 1:
            oldest = next(iter(self._scopes))
            if oldest == keep:
                self._scopes.move_to_end(oldest)
                oldest = next(iter(self._scopes))
            total -= self._scopes.pop(oldest).capacity

    def start(
        self,
        tx: VectorIndexTx,
        scope: Scope,
        generation: int,
        payload_of: PayloadOf,
        query: str,
        *,
        valid_at_ms: int,
        limit: int,
    ) -> Started:
        """The first half of a search: the scope's index caught up to the snapshot (`tx` at `generation`),
        then the model reading the query and the base's graph searched for it on a thread of the cache's
        own, while the caller reads its lexical channel (the model, faiss and SQLite all let go of the
        interpreter: the two halves take one's time on two cores). The model reads the query only when a
        record is eligible, and outside the scope's lock."""
        with self._scope_lock(scope):
            index, fresh = self._catch_up(tx, scope, generation, payload_of)
            eligible = index.eligible(generation, valid_at_ms)
            request = index.graph_request(generation, valid_at_ms, limit) if eligible else None
        started = Started(scope, generation, valid_at_ms, limit, index, index.state, eligible, fresh)
        if eligible:
            started.vector = Future()
            started.answering = self._helpers().submit(self._ask, scope, query, request, started.vector)
        return started

    def finish(self, tx: VectorIndexTx, started: Started, payload_of: PayloadOf) -> SemanticAnswer:
        """The second half: the `limit` records nearest the query as of the snapshot, best first."""
        fresh = list(started.fresh)
        if started.answering is None or started.vector is None:
            return SemanticAnswer(0, [], tuple(fresh))
        # The query's vector comes before the graph's proposals: the rows outside the base are scored
        # while the helper still walks the graph, whose proposals are waited for outside the lock.
        vector = started.vector.result()
        scope, generation, valid_at_ms, limit = started.scope, started.generation, started.valid_at_ms, started.limit
        with self._scope_lock(scope):
            index = started.index
            replaced = index is not self._scopes.get(scope)
            if replaced or (index.state != started.state and not index.serves(tx, scope, generation)):
                index, more = self._catch_up(tx, scope, generation, payload_of)
                fresh.extend(more)
            own, state = index.own_nearest(vector, generation, valid_at_ms, limit), index.state
        proposals = started.answering.result()
        with self._scope_lock(scope):
            unchanged = index.state == state  # else caught up by another search meanwhile: all scored again
            if not unchanged and not index.serves(tx, scope, generation):
                index, more = self._catch_up(tx, scope, generation, payload_of)
                fresh.extend(more)
            nearest = index.nearest(
                vector,
                generation=generation,
                valid_at_ms=valid_at_ms,
                limit=limit,
                proposals=proposals,
                own=own if unchanged else None,
            )
        return SemanticAnswer(started.eligible, nearest, tuple(fresh))

    def _ask(self, scope: Scope, query: str, request: GraphRequest | None, vector: Future[Matrix]) -> Proposals | None:
        try:
            found = self.query_vector(scope, query)
        except BaseException as error:
            vector.set_exception(error)
            raise
        vector.set_result(found)
        return None if request is None else request.propose(found)

    def _helpers(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._asking is None:
                self._asking = ThreadPoolExecutor(max_workers=ASKING_THREADS, thread_name_prefix="engram-query")
            return self._asking


@dataclass(slots=True)
class Started:
    """A search's semantic half between `start` and `finish`."""

    scope: Scope
    generation: int
    valid_at_ms: int
    limit: int
    index: ScopeIndex
    state: tuple[int, Stamp, Base | None]  # the index's when started: unchanged, it still serves the snapshot
    eligible: int
    fresh: list[Embedded]
    vector: Future[Matrix] | None = None  # the query's, set by the helper before it asks the graph
    answering: Future[Proposals | None] | None = None


def _replaces(base: Base | None, index: ScopeIndex) -> bool:
    """Whether `base` should take the place of what `index` stands on: a first base, or a newer
    generation (a later or equal stamp: the same rows written again)."""
    if base is None or index.base is base:
        return False
    return index.base is None or base.stamp.cursor >= index.base.stamp.cursor


def index_vector(
    cache: VectorCache | None, tx: VectorsTx, scope: Scope, record_id: str, payload: Mapping[str, Any]
) -> None:
    """Embeds a record that has just become accepted_current, in the transaction that made it so."""
    if cache is None:
        return
    embedded = embed_record(cache, scope, record_id, payload)
    tx.put_vector(scope, record_id, embedded.vector_id, to_bytes(embedded.vector), embedded.subject)
