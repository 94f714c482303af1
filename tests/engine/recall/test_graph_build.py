"""A shared base's graph: built in a child process (engine/recall/graph_build.py), searched between locks.

A real server process with the embedding model loaded asks for a base of 40,000 rows on its background
worker and stops while the child builds the graph: it must exit with status 0 (an in-process build made it
abort in faiss' threads), the child must stop by itself, and the unpublished folder it leaves must go
with the next write. Waits are bounded polls for states, never timings. And the graph's proposals, found
off the scope's lock while the lexical channel runs, stand only for the index state they were asked for.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.shared_index import BaseFiles, Rows, Stamp
from engram_memory.engine.recall.vector_index import ScopeIndex

SCOPE = Scope("tenant-a", "workspace-a")
VECTOR_ID = "model-a"

_SERVER = """
import os, sys, time
from pathlib import Path
import numpy as np
from engram_memory.embeddings.loader import load_model
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.shared_builds import SharedBases
from engram_memory.engine.recall.shared_index import BaseFiles, Rows, Stamp

model = load_model()
assert model is not None
model.embedder.embed_queries(["a question keeps the model's threads alive"])
rows = 40_000
vectors = np.random.default_rng(7).standard_normal((rows, 384)).astype(np.float32)
ids = np.array([f"mem_{n:036d}".encode() for n in range(rows)], dtype="S40")
never = np.full(rows, np.iinfo(np.int64).max, dtype=np.int64)
batch = Rows(Stamp(5, "sha256:" + "0" * 64), ids, vectors, ["s"] * rows, np.zeros(rows, np.int64), never, never)
def _child():
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                words = (entry / "cmdline").read_bytes().split(b"\\0")
            except OSError:
                continue
            mine = any(sys.argv[1].encode() in word for word in words)
            if b"engram_memory.engine.recall.graph_build" in words and mine:
                return int(entry.name)
    return None


shared = SharedBases(BaseFiles(Path(sys.argv[1])))
shared.build(Scope("tenant-a", "workspace-a"), "model-a", None, rows, lambda: batch)
while not any(Path(sys.argv[1]).glob("*/.g*/vectors.npy")):
    time.sleep(0.05)
while not _child():
    time.sleep(0.05)
print("stopping while the graph is built", flush=True)
sys.exit(0)
"""


def _builders(folder: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"engram_memory.engine.recall.graph_build" in words and any(str(folder).encode() in w for w in words):
            found.append(int(entry.name))
    return found


def _rows(count: int) -> Rows:
    vectors = np.random.default_rng(3).standard_normal((count, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.array([f"mem_{n:036d}".encode() for n in range(count)], dtype="S40")
    never = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
    return Rows(Stamp(9, "sha256:" + "1" * 64), ids, vectors, ["s"] * count, np.zeros(count, np.int64), never, never)


def test_a_server_stopped_during_a_build_exits_cleanly_and_its_builder_stops(tmp_path: Path) -> None:
    folder = tmp_path / "vectors"
    done = subprocess.run(
        [sys.executable, "-c", _SERVER, str(folder)], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "stopping while the graph is built" in done.stdout
    assert "terminate called" not in done.stderr
    deadline = time.monotonic() + 60
    while _builders(folder) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _builders(folder) == [], "the graph builder outlived its parent"
    scope_folder = next(folder.iterdir())
    assert not (scope_folder / "CURRENT").exists()
    assert list(scope_folder.glob(".g*")), "the interrupted build's folder should be left unpublished"

    name = BaseFiles(folder).write(SCOPE, VECTOR_ID, _rows(500))
    assert [p.name for p in scope_folder.iterdir() if p.is_dir()] == [name]
    base = BaseFiles(folder).open(SCOPE, VECTOR_ID, 384)
    assert base is not None and base.rows == 500
    held = np.ones(500, dtype=bool)
    assert len(base.nearest_rows(base.vectors_of([17])[0], held, 10)) == 10


def test_graph_proposals_found_off_the_lock_are_used_only_for_the_state_they_were_asked_for(tmp_path: Path) -> None:
    """A search asks the graph between locks (VectorCache.start/finish): what it proposed must never stand
    for a changed index or another snapshot."""
    files = BaseFiles(tmp_path)
    rows = _rows(300)
    files.write(SCOPE, VECTOR_ID, rows)
    base = files.open(SCOPE, VECTOR_ID, 384)
    assert base is not None
    index = ScopeIndex(384, base.stamp, base)
    query = base.vectors_of([42])[0]
    generation, now = base.stamp.cursor + 1, 1_000
    request = index.graph_request(generation, now, 10)
    assert request is not None
    proposals = request.propose(query)
    fresh = index.nearest(query, generation=generation, valid_at_ms=now, limit=10)
    assert index.nearest(query, generation=generation, valid_at_ms=now, limit=10, proposals=proposals) == fresh
    nearest_id = fresh[0].record_id
    assert nearest_id == base.record_id(42)

    index.drop(nearest_id, generation)  # the index changed between the two locks
    after = index.nearest(query, generation=generation, valid_at_ms=now, limit=10, proposals=proposals)
    assert nearest_id not in [n.record_id for n in after]
    assert after == index.nearest(query, generation=generation, valid_at_ms=now, limit=10)
    assert len(after) == 10

    earlier = base.stamp.cursor  # another snapshot, where the record is still current
    request = index.graph_request(generation, now, 10)
    assert request is not None
    stale = request.propose(query)
    before = index.nearest(query, generation=earlier, valid_at_ms=now, limit=10, proposals=stale)
    assert before[0].record_id == nearest_id
    assert before == index.nearest(query, generation=earlier, valid_at_ms=now, limit=10)


def test_own_rows_scored_before_the_graph_answers_stand_only_while_the_index_state_holds(tmp_path: Path) -> None:
    """finish scores the rows outside the base, lets go of the lock while the graph finishes, and reuses
    that scoring only if the index's state did not move: every change that could alter it moves it."""
    files = BaseFiles(tmp_path)
    files.write(SCOPE, VECTOR_ID, _rows(300))
    base = files.open(SCOPE, VECTOR_ID, 384)
    assert base is not None
    index = ScopeIndex(384, base.stamp, base)
    extra = np.random.default_rng(11).standard_normal((20, 384)).astype(np.float32)
    extra /= np.linalg.norm(extra, axis=1, keepdims=True)
    at = base.stamp.cursor + 1
    for n, vector in enumerate(extra):
        index.put(f"mem_own_{n:02d}", vector, "s", (0, None, None), at)
    generation, now, query = at, 1_000, extra[3]
    own, state = index.own_nearest(query, generation, now, 10), index.state
    request = index.graph_request(generation, now, 10)
    assert request is not None
    proposals = request.propose(query)
    alone = index.nearest(query, generation=generation, valid_at_ms=now, limit=10)
    reused = index.nearest(query, generation=generation, valid_at_ms=now, limit=10, proposals=proposals, own=own)
    assert reused == alone and alone[0].record_id == "mem_own_03"

    index.put("mem_own_new", extra[3], "s", (0, None, None), at + 1)
    assert index.state != state
    state = index.state
    index.drop("mem_own_03", at + 2)
    assert index.state != state
