"""The vector indexer paces an import (engine/recall/indexer.py).

An import commits records faster than the model embeds them; what waits for its vector holds its payload
in memory, so an import waits while IMPORT_BACKLOG records are queued. The model is held back by an
injected gate (a slow model cannot be caused on demand); nothing here waits on a clock to pass.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from engram_memory.embeddings.loader import load_model
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.indexer import WRITE_CHUNK, VectorIndexer
from engram_memory.engine.recall.semantic import Embedded, VectorCache
from engram_memory.host.compose import open_store
from tests.support.homes import make_home
from tests.support.payloads import capture_args

SCOPE = Scope("tenant-a", "workspace-1")


def test_waiting_below_a_backlog_returns_only_once_the_model_has_taken_it_injected_slow_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = load_model()
    assert model is not None
    cache = VectorCache(model)
    gate, entered = threading.Event(), threading.Event()
    embed = cache.embed_texts

    def gated(scope: Scope, texts: Any) -> Any:
        entered.set()
        gate.wait()
        return embed(scope, texts)

    monkeypatch.setattr(cache, "embed_texts", gated)
    store = open_store(make_home(tmp_path / "home"))
    indexer = VectorIndexer(store, cache)
    try:
        payload = capture_args("The standup moved to half past nine.")["payload"]
        indexer.schedule(SCOPE, "mem_first", payload)
        assert entered.wait(timeout=60), "the worker never took the first record"
        for n in range(3):
            indexer.schedule(SCOPE, f"mem_queued_{n}", payload)

        waited = threading.Event()

        def importer() -> None:
            indexer.wait_below(2)
            waited.set()

        thread = threading.Thread(target=importer)
        thread.start()
        assert not waited.wait(timeout=0.5), "the import went on while three records waited for the model"
        indexer.wait_below(4)  # below the bound already: returns at once
        gate.set()
        thread.join(timeout=120)
        assert waited.is_set()
        indexer.settle()
        assert indexer.depth == 0
    finally:
        gate.set()
        indexer.close()
        store.close()


class _CountingWrites:
    """A real store whose write transactions are counted (how the indexer splits its writes)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.writes = 0

    def write(self, *args: Any, **kwargs: Any) -> Any:
        self.writes += 1
        return self._store.write(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def test_a_backlog_s_vectors_are_written_in_short_transactions(tmp_path: Path) -> None:
    """A backlog's vectors are written WRITE_CHUNK to a transaction, so no write holds the scope's lock
    for long (an import's next batch, and agents' admissions, wait for it)."""
    model = load_model()
    assert model is not None
    store = open_store(make_home(tmp_path / "home"))
    counting = _CountingWrites(store)
    indexer = VectorIndexer(counting, VectorCache(model))  # type: ignore[arg-type]
    try:
        count = WRITE_CHUNK * 2 + 7
        vector = model.query_vector("a note")
        embedded = [Embedded(f"mem_{n:026d}", model.vector_id, vector, "") for n in range(count)]
        indexer.write(SCOPE, embedded)
        indexer.settle()
        assert counting.writes == 3
    finally:
        indexer.close()
        store.close()
