"""Admitted records' vectors, computed off the request path by a worker thread (two for a backlog).

Admission commits the record and hands its payload here; the agent's call returns without waiting
for the model. The worker embeds each record on its own (so a vector never depends on what else was
queued), each text of a batch once, and writes whatever is ready in one unsynced transaction:
a vector is derived data, so a power cut may lose it, never a record, and a search re-embeds any
accepted_current record it finds without one (VectorCache catches up). Before ranking, a search waits
for this process's queue to drain, so what it ranks never depends on how far the worker has got.

Only records that are accepted_current when the write lands get a vector: a record forgotten, or an
admission rolled back, in the meantime leaves nothing behind (the store's put_vector checks).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from engram_memory.engine.ports.store import Scope, Store
from engram_memory.engine.recall.semantic import Embedded, VectorCache, embed_record, to_bytes

__all__ = ["VectorIndexer"]

logger = logging.getLogger(__name__)

# A trickle of admissions (an agent's captures) is embedded by one thread, beside the request thread: a
# second model thread there only takes the request thread's core. A backlog of PARALLEL_FROM records or
# more (an import) is embedded by MODEL_THREADS at once, each run still one text on one thread, so every
# vector is the same floats either way: 130 -> 217 memories/s on the synthetic corpus of bench/scale.py
# (5,000 memories, multilingual-e5-small, two cores, docs/benchmarks.md).
MODEL_THREADS = 2
PARALLEL_FROM = 64
# Vectors written per transaction: each holds its scopes' write locks, which an import's next batch and
# agents' admissions wait for (on PostgreSQL at most lock_timeout: 25,000 vectors in one transaction
# outlasted it and failed a benchmark import's batch).
WRITE_CHUNK = 500


@dataclass(frozen=True, slots=True)
class _Job:
    scope: Scope
    record_id: str
    payload: Mapping[str, Any] | None  # None: already embedded (a search's catch-up), only to be written
    embedded: Embedded | None


class VectorIndexer:
    def __init__(self, store: Store, cache: VectorCache) -> None:
        self._store = store
        self._cache = cache
        self._jobs: list[_Job] = []
        self._busy = False
        self._closed = False
        self._changed = threading.Condition()
        self._pool = ThreadPoolExecutor(MODEL_THREADS, thread_name_prefix="engram-vector-model")
        self._thread = threading.Thread(target=self._work, name="engram-vector-indexer", daemon=True)
        self._thread.start()

    def schedule(self, scope: Scope, record_id: str, payload: Mapping[str, Any]) -> None:
        """Queues a record that is becoming accepted_current (called inside its admission's transaction)."""
        self._put(_Job(scope, record_id, payload, None))

    def write(self, scope: Scope, embedded: Sequence[Embedded]) -> None:
        """Queues vectors a search computed itself, to be kept for the next one."""
        self._put(*(_Job(scope, item.record_id, None, item) for item in embedded))

    def _put(self, *jobs: _Job) -> None:
        with self._changed:
            if self._closed:
                return
            self._jobs.extend(jobs)
            self._changed.notify_all()

    @property
    def depth(self) -> int:
        """Records waiting for their vector (queued, or in the batch being embedded now)."""
        with self._changed:
            return len(self._jobs) + (1 if self._busy else 0)

    def wait_below(self, depth: int) -> None:
        """Returns once fewer than `depth` records wait in the queue: an import's pace, so that a store's
        worth of payloads is never held waiting for the model (a million-memory import peaked at 10.7 GB
        without it)."""
        with self._changed:
            while len(self._jobs) >= depth and not self._closed:
                self._changed.wait()

    def settle(self) -> None:
        """Returns once every job queued before the call is written (or has failed and been logged)."""
        with self._changed:
            while (self._jobs or self._busy) and not self._closed:
                self._changed.wait()

    def close(self) -> None:
        """Finishes the queue, then stops the worker; later jobs are dropped (a search catches them up)."""
        self.settle()
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join(timeout=30)
        self._pool.shutdown(wait=False)

    def _work(self) -> None:
        while True:
            with self._changed:
                while not self._jobs and not self._closed:
                    self._changed.wait()
                if self._closed and not self._jobs:
                    return
                jobs, self._jobs = self._jobs, []
                self._busy = True
            try:
                self._index(jobs)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _embedded(self, job: _Job) -> tuple[Scope, Embedded] | None:
        try:
            return job.scope, job.embedded or embed_record(self._cache, job.scope, job.record_id, job.payload or {})
        except Exception:  # the model failed on this text: the next search embeds it again
            logger.exception("embedding a record failed; a search will retry it")
            return None

    def _index(self, jobs: list[_Job]) -> None:
        embedded = self._pool.map(self._embedded, jobs) if len(jobs) >= PARALLEL_FROM else map(self._embedded, jobs)
        ready = [item for item in embedded if item is not None]
        for start in range(0, len(ready), WRITE_CHUNK):
            chunk = ready[start : start + WRITE_CHUNK]
            try:
                with self._store.write(synced=False, scopes={scope for scope, _ in chunk}) as tx:
                    for scope, item in chunk:
                        tx.put_vector(scope, item.record_id, item.vector_id, to_bytes(item.vector), item.subject)
            except Exception as exc:  # a background thread: nothing to return an error to
                logger.error("vectors could not be written (%s); a search will embed them again", type(exc).__name__)
