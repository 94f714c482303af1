"""Who writes a large scope's shared files (shared_index.py), and when: one process at a time per scope,
off the search path.

A process asks for a new base when a scope it searched has SHARED_FROM live rows or more and either has
no base or has changed by MERGE_SHARE of it since; the rows are copied under the scope's lock (the
index's own, current at its stamp), and written by a worker thread (the graph by a child process of its
own: graph_build.py), so searches go on with exact scoring meanwhile. An advisory lock on a file of the
scope's folder keeps two processes from writing the same scope at once; the loser simply finds the
winner's generation at its next search.
"""

from __future__ import annotations

import fcntl
import logging
import threading
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass

from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.shared_index import MERGE_MIN, MERGE_SHARE, SHARED_FROM, Base, BaseFiles, Rows

__all__ = ["SharedBases"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class _Job:
    scope: Scope
    vector_id: str
    rows: Rows  # a new base from these rows

    @property
    def key(self) -> tuple[Scope, str]:
        return (self.scope, self.vector_id)


class SharedBases:
    """The files of one host, and the worker that writes them (`background=False`: the caller's thread,
    for tests that must not depend on timing)."""

    def __init__(
        self,
        files: BaseFiles,
        *,
        shared_from: int = SHARED_FROM,
        background: bool = True,
        build_threads: int = 1,
    ) -> None:
        self.files = files
        self.shared_from = shared_from
        self._background = background
        self._threads = build_threads
        self._lock = threading.Condition()
        self._jobs: list[_Job] = []
        self._running: set[tuple[Scope, str]] = set()
        self._opened: dict[tuple[Scope, str], tuple[str, Base]] = {}
        self._asked: dict[tuple[Scope, str], tuple[str | None, int]] = {}  # (base name, live rows) when asked
        self._worker: threading.Thread | None = None

    # -- reading -------------------------------------------------------------------------------------

    def current(self, scope: Scope, vector_id: str, dimension: int) -> Base | None:
        """The scope's current base, opened once per generation."""
        name = self.files.current(scope, vector_id)
        if name is None:
            return None
        with self._lock:
            opened = self._opened.get((scope, vector_id))
        if opened is not None and opened[0] == name:
            return opened[1]
        base = self.files.open(scope, vector_id, dimension)
        if base is not None:
            with self._lock:
                self._opened[(scope, vector_id)] = (base.folder.name, base)
        return base

    # -- asking for writes ---------------------------------------------------------------------------

    def wants_base(self, live: int, changed: int, base: Base | None) -> bool:
        """Whether a scope of `live` rows, `changed` of them beside its base, should get a new one."""
        if live < self.shared_from:
            return False
        return base is None or changed >= max(MERGE_MIN, MERGE_SHARE * base.rows)

    def build(self, scope: Scope, vector_id: str, base: Base | None, live: int, rows: Callable[[], Rows]) -> None:
        """Asks for a new base of the scope; `rows` is called now (under the caller's lock). A scope is
        asked for once per base it stands on until MERGE_MIN more rows: a write that failed, or another
        process that holds the scope's lock, is not asked again at every search."""
        key = (scope, vector_id)
        standing = None if base is None else base.folder.name
        with self._lock:
            asked = self._asked.get(key)
            if asked is not None and asked[0] == standing and live < asked[1] + MERGE_MIN:
                return
            self._asked[key] = (standing, live)
        self._submit(_Job(scope, vector_id, rows=rows()))

    def _submit(self, job: _Job) -> None:
        if not self._background:
            self._run(job)
            return
        with self._lock:
            self._jobs.append(job)
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="engram-vector-bases", daemon=True)
                self._worker.start()
            self._lock.notify_all()

    def settle(self) -> None:
        """Returns once no write is waiting or running (a benchmark's, or a test's, barrier)."""
        with self._lock:
            while self._jobs or self._running:
                self._lock.wait()

    # -- writing -------------------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._jobs:
                    self._lock.wait()
                job = self._jobs.pop(0)
                key = job.key
                self._running.add(key)
            try:
                self._run(job)
            finally:
                with self._lock:
                    self._running.discard(key)
                    self._lock.notify_all()

    def _run(self, job: _Job) -> None:
        folder = self.files.folder(job.scope, job.vector_id)
        try:
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            with (folder / "write.lock").open("a+b") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return  # another process writes this scope now
                try:
                    self._write(job)
                finally:
                    with suppress(OSError):
                        fcntl.flock(handle, fcntl.LOCK_UN)
        except Exception as exc:  # derived data: searches go on exactly, the next one asks again
            logger.error("a shared vector file could not be written (%s)", type(exc).__name__)

    def _write(self, job: _Job) -> None:
        current = self.files.current(job.scope, job.vector_id)
        if current is not None and int(current[1:].split("-", 1)[0]) >= job.rows.stamp.cursor:
            return  # another process wrote one at least as recent meanwhile
        self.files.write(job.scope, job.vector_id, job.rows, threads=self._threads)
