"""A shared base's graph (faiss HNSW over 8-bit codes), built in a child process of its own.

Why a child: a large scope's graph takes minutes of native code and a gigabyte or more of working memory.
Built on a thread of a `serve` process, a process that stopped meanwhile aborted in the library's threads
at exit (std::terminate: the agent's client sees a crash), and the build's memory stayed in the server's
heap. The child reads the vectors the parent already wrote to the new generation's folder (mapped), writes
the graph beside them, and stops by itself as soon as its parent is gone, so a stopped server leaves only
an unpublished folder that the next write removes.

Run as `python -m engram_memory.engine.recall.graph_build FOLDER THREADS`.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["BUILD_BREADTH", "CONNECTIVITY", "GRAPH_FILE", "build_graph", "faiss_module"]

CONNECTIVITY = 16  # HNSW links per node
BUILD_BREADTH = 128  # efConstruction
GRAPH_FILE = "graph.faiss"
_LAYOUT_FILE = "graph.json"
_PARENT_CHECK_S = 1.0


def faiss_module() -> Any:
    """faiss, untyped: its bundled stubs do not describe the SWIG classes' Python forms used here. Its
    loader tells at INFO which CPU build it tried: nothing an operator needs in the server's log."""
    logging.getLogger("faiss.loader").setLevel(logging.WARNING)
    return importlib.import_module("faiss")


def build_graph(folder: Path, threads: int) -> int:
    """Builds `folder`/graph.faiss from `folder`/vectors.npy in a child process; returns where the graph
    file keeps its rows' 8-bit codes. Raises RuntimeError if the child fails."""
    completed = subprocess.run(  # noqa: S603 (this interpreter, this module, our own folder)
        [sys.executable, "-m", __name__, str(folder), str(threads)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"the graph build exited with status {completed.returncode}")
    layout = json.loads((folder / _LAYOUT_FILE).read_text(encoding="utf-8"))
    (folder / _LAYOUT_FILE).unlink()
    return int(layout["codes_at"])


def _codes_offset(graph: Path, index: Any) -> int:
    """Where the graph file keeps its rows' 8-bit codes (one block, row after row), found by the first
    rows' bytes: what a forget overwrites. Raises ValueError if they cannot be told apart."""
    faiss = faiss_module()
    storage = faiss.downcast_index(index.storage)
    codes = faiss.rev_swig_ptr(storage.codes.data(), storage.codes.size())
    needle = bytes(codes[: min(index.ntotal, 8) * storage.code_size])
    data = graph.read_bytes()
    at = data.find(needle)
    if at < 0 or data.find(needle, at + 1) >= 0 or bytes(data[at : at + codes.size]) != bytes(codes):
        raise ValueError("the graph file's codes could not be located")
    return at


def _stop_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(_PARENT_CHECK_S)
    os._exit(3)


def _build(folder: Path, threads: int) -> None:
    faiss = faiss_module()
    matrix = np.load(folder / "vectors.npy", mmap_mode="r")
    index = faiss.IndexHNSWSQ(matrix.shape[1], faiss.ScalarQuantizer.QT_8bit, CONNECTIVITY, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = BUILD_BREADTH
    faiss.omp_set_num_threads(threads)
    rows = np.ascontiguousarray(matrix, dtype=np.float32)
    index.train(rows)
    index.add(rows)
    faiss.write_index(index, str(folder / GRAPH_FILE))
    layout = {"codes_at": _codes_offset(folder / GRAPH_FILE, index)}
    (folder / _LAYOUT_FILE).write_text(json.dumps(layout), encoding="utf-8")


def main(argv: list[str]) -> int:
    threading.Thread(target=_stop_when_orphaned, args=(os.getppid(),), daemon=True).start()
    folder, threads = Path(argv[0]), max(1, int(argv[1]))
    _build(folder, threads)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
