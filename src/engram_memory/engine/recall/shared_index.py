"""A large scope's vectors as files every process of the machine maps: an approximate index (faiss HNSW
over 8-bit codes) of the scope's accepted_current records at one stamp, with their ids and validity.

A scope with SHARED_FROM memories or more is searched through such a base plus, in each process, the
exact rows of what changed since its stamp (vector_index.py): the graph's codes are mapped from the file,
so ten `serve` processes hold them once, and a new process opens them instead of reading every vector.
The graph only chooses candidates: their cosines are computed again from the stored float32 vectors, so
a record's score is the exact one, and only which records enter fusion can differ from exact search
(its recall is measured in docs/benchmarks.md). Every process that opens the same base and catches up
to the same state gives the same answer (docs/decisions/0027-shared-vector-files.md).

A base is derived data: it is never the judge of what is current (the store is, at every search), it
is never used where its stamp does not hold (a restore), and a forgotten record's codes and vector are
overwritten with zeros in the files themselves (`Base.erase`, by the forget and by any process that
catches up past it), so forgetting leaves no copy of its vector behind.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import secrets
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from engram_memory.engine.ports.agent_tx import JournalTx
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.graph_build import CONNECTIVITY, GRAPH_FILE, build_graph, faiss_module

__all__ = [
    "CONNECTIVITY",
    "ID_WIDTH",
    "SEARCH_BREADTH",
    "SHARED_FROM",
    "Base",
    "BaseFiles",
    "Rows",
    "Stamp",
    "available",
]

FORMAT = 2  # 2: the offsets that erase overwrites
# Live rows from which a scope is kept in a base: below it exact search in memory is fast and small.
SHARED_FROM = 50_000
# A process asks for a new base once the rows that changed since the base's stamp reach this share of it
# (and at least MERGE_MIN): until then it scores them exactly, in its own memory.
MERGE_SHARE = 0.1
MERGE_MIN = 5_000
# efSearch: how many candidates the graph walk keeps; at least twice the rows asked for, and twice as
# many in a graph of more than WIDER_FROM rows, where a walk of the same breadth finds less (decision 0027:
# 512 keeps 95.6 % of exact search's pool of 150 at 100,000 rows, in 0.4 of 1,024's time; 1,024 kept
# 94.0 % at 1,000,000).
SEARCH_BREADTH = 512
WIDER_FROM = 250_000
ID_WIDTH = 40  # bytes of a record id in the ids column ("mem_" + 26 base32 letters, with room to spare)
_OPEN = np.iinfo(np.int64).max


def available() -> bool:
    """Whether faiss (the semantic extra) is installed; it is imported only when a scope needs it."""
    return importlib.util.find_spec("faiss") is not None


def _key(scope: Scope, vector_id: str) -> str:
    material = "\x00".join((scope.tenant, scope.workspace, vector_id)).encode("utf-8")
    return hashlib.sha256(material).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Stamp:
    """The records cursor an index reflects and the journal's digest there (None at cursor 0)."""

    cursor: int
    digest: str | None

    @classmethod
    def read(cls, tx: JournalTx, scope: Scope, cursor: int) -> Stamp:
        return cls(cursor, tx.event_digest(scope, cursor) if cursor else None)

    def holds(self, tx: JournalTx, scope: Scope) -> bool:
        """Whether the snapshot's journal is the one this stamp was read from, up to the stamp."""
        return self.cursor == 0 or tx.event_digest(scope, self.cursor) == self.digest


@dataclass(frozen=True, slots=True)
class Rows:
    """A scope's live rows at one stamp, in any order, as a new base is written from them."""

    stamp: Stamp
    ids: npt.NDArray[np.bytes_]
    vectors: npt.NDArray[np.float32]
    subjects: list[str]
    valid_from: npt.NDArray[np.int64]
    valid_to: npt.NDArray[np.int64]  # _OPEN: no end
    expires: npt.NDArray[np.int64]  # _OPEN: never


def _mapped(path: Path) -> npt.NDArray[Any]:
    """The file's array, mapped read-only (shared with every process that maps it), as a plain array: a
    memmap's own indexing costs microseconds a row."""
    mapped: npt.NDArray[Any] = np.load(path, mmap_mode="r").view(np.ndarray)
    return mapped


class Base:
    """One generation of a scope's files, opened: the graph's codes mapped, the columns mapped, and the
    float32 vectors read by row (`vectors_of`). Mapped, the vectors would be counted whole in each
    process's memory: the kernel maps 64 KB of cached file around every page a search touches, so a
    thousand searches' rescoring mapped nearly all of a million memories' 1.5 GB (measured: a serving
    process's PSS 2.7 GB); read by row, they stay in the page cache, shared and counted in no process."""

    def __init__(
        self, folder: Path, index: Any, stamp: Stamp, shape: tuple[int, int], offsets: tuple[int, int]
    ) -> None:
        self.folder = folder
        self._index = index
        self.stamp = stamp
        self.rows, self.dimension = shape
        self._codes_at, self._vectors_at = offsets
        self.ids: npt.NDArray[np.bytes_] = _mapped(folder / "ids.npy")
        self.valid_from: npt.NDArray[np.int64] = _mapped(folder / "valid_from.npy")
        self.valid_to: npt.NDArray[np.int64] = _mapped(folder / "valid_to.npy")
        self.expires: npt.NDArray[np.int64] = _mapped(folder / "expires.npy")
        # The valid times at which every row is valid and unexpired: a search then reads none of the columns.
        self.valid_throughout = (
            (int(self.valid_from.max()), int(min(self.valid_to.min(), self.expires.min() - 1)))
            if self.rows
            else (0, -1)
        )
        self._subjects: npt.NDArray[np.uint8] = _mapped(folder / "subjects.npy")
        self._subject_ends: npt.NDArray[np.int64] = _mapped(folder / "subject_ends.npy")

    def vectors_of(self, rows: Sequence[int] | npt.NDArray[np.intp]) -> npt.NDArray[np.float32]:
        """These rows' float32 vectors, in the order given (an erased row reads as zeros)."""
        width = self.dimension * 4
        with (self.folder / "vectors.npy").open("rb", buffering=0) as handle:
            fd = handle.fileno()
            data = b"".join(os.pread(fd, width, self._vectors_at + int(row) * width) for row in rows)
        return np.frombuffer(data, dtype=np.float32).reshape(len(rows), self.dimension)

    def copied_vectors(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.float32]:
        """Many rows' vectors, copied through a mapping dropped at once (what a new base is written from)."""
        mapped = np.load(self.folder / "vectors.npy", mmap_mode="r")
        copied: npt.NDArray[np.float32] = np.asarray(mapped[rows], dtype=np.float32)
        del mapped
        return copied

    def row_of(self, record_id: str) -> int | None:
        """The record's row (ids are sorted), or None."""
        key = record_id.encode("ascii", "replace")
        row = int(np.searchsorted(self.ids, key))
        return row if row < self.rows and self.ids[row] == key else None

    def still_holds(self, record_id: str) -> bool:
        """Whether the record's vector is in these files (not erased: a unit vector is never all zeros)."""
        row = self.row_of(record_id)
        return row is not None and bool(np.any(self.vectors_of([row])))

    def erase(self, record_ids: Sequence[str]) -> list[str]:
        """Overwrites these records' codes and float32 vectors with zeros, in the files themselves (every
        process that maps them reads the zeros at once), and returns those it erased. A forgotten record's
        row stays, dead in every process that caught up past the forgetting; writing zeros twice is
        harmless, so any process may do it."""
        rows = sorted({(row, record_id) for record_id in record_ids if (row := self.row_of(record_id)) is not None})
        erased = [record_id for row, record_id in rows if np.any(self.vectors_of([row]))]
        if not erased:
            return []
        code_size = int(faiss_module().downcast_index(self._index.storage).code_size)
        row_bytes = self.dimension * 4
        for name, start, width in (
            (GRAPH_FILE, self._codes_at, code_size),
            ("vectors.npy", self._vectors_at, row_bytes),
        ):
            with (self.folder / name).open("r+b") as handle:
                for row, _ in rows:
                    handle.seek(start + row * width)
                    handle.write(bytes(width))
                handle.flush()
                os.fsync(handle.fileno())
        return erased

    def record_id(self, row: int) -> str:
        return bytes(self.ids[row]).decode("ascii")

    def subject(self, row: int) -> str:
        start = 0 if row == 0 else int(self._subject_ends[row - 1])
        return bytes(self._subjects[start : int(self._subject_ends[row])]).decode("utf-8")

    def nearest_rows(self, query: npt.NDArray[np.float32], held: npt.NDArray[np.bool_], k: int) -> list[int]:
        """The graph's `k` best rows among `held`, in no particular order (the caller scores them exactly)."""
        faiss = faiss_module()
        if k <= 0:
            return []
        selector = faiss.IDSelectorBitmap(np.packbits(held, bitorder="little"))
        breadth = SEARCH_BREADTH if self.rows <= WIDER_FROM else 2 * SEARCH_BREADTH
        params = faiss.SearchParametersHNSW(sel=selector, efSearch=max(breadth, 2 * k))
        _, found = self._index.search(query.reshape(1, -1), k, params=params)
        return [int(row) for row in found[0] if row >= 0]


class BaseFiles:
    """The bases of one machine's stores, in a folder of the host's home: one folder per scope and model,
    in it one folder per generation and a CURRENT file naming the one to open."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, scope: Scope, vector_id: str) -> Path:
        return self.root / _key(scope, vector_id)

    def current(self, scope: Scope, vector_id: str) -> str | None:
        """The name of the scope's current generation (a cheap read, to notice a new one), or None."""
        try:
            return (self.folder(scope, vector_id) / "CURRENT").read_text(encoding="utf-8").strip() or None
        except OSError:
            return None

    def open(self, scope: Scope, vector_id: str, dimension: int) -> Base | None:
        """The current generation, or None (none yet, another format, or files that do not open)."""
        faiss = faiss_module()
        name = self.current(scope, vector_id)
        if name is None:
            return None
        folder = self.folder(scope, vector_id) / name
        try:
            meta = json.loads((folder / "stamp.json").read_text(encoding="utf-8"))
            if meta.get("format") != FORMAT or meta.get("dimension") != dimension:
                return None
            index = faiss.read_index(str(folder / GRAPH_FILE), faiss.IO_FLAG_MMAP_IFC)
            offsets = (int(meta["codes_at"]), int(meta["vectors_at"]))
            shape = (int(meta["rows"]), int(meta["dimension"]))
            return Base(folder, index, Stamp(int(meta["cursor"]), meta["digest"]), shape, offsets)
        except (OSError, ValueError, KeyError, RuntimeError):
            return None

    def write(self, scope: Scope, vector_id: str, rows: Rows, *, threads: int = 1) -> str:
        """Writes a new generation of the scope's rows (its graph built by a child process on `threads`
        threads: graph_build.py), makes it current and removes the older ones; returns its name."""
        folder = self.folder(scope, vector_id)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = f"g{rows.stamp.cursor}-{secrets.token_hex(4)}"
        work = folder / f".{name}"
        work.mkdir(mode=0o700)
        order = np.argsort(rows.ids, kind="stable")
        subjects = [rows.subjects[i].encode("utf-8") for i in order]
        columns: dict[str, npt.NDArray[Any]] = {
            "ids": rows.ids[order],
            "valid_from": rows.valid_from[order],
            "valid_to": rows.valid_to[order],
            "expires": rows.expires[order],
            "subjects": np.frombuffer(b"".join(subjects), dtype=np.uint8),
            "subject_ends": np.cumsum([len(s) for s in subjects], dtype=np.int64),
        }
        for column, values in columns.items():
            np.save(work / f"{column}.npy", values)
        np.save(work / "vectors.npy", np.ascontiguousarray(rows.vectors[order], dtype=np.float32))
        meta = {
            "format": FORMAT,
            "cursor": rows.stamp.cursor,
            "digest": rows.stamp.digest,
            "rows": len(order),
            "dimension": int(rows.vectors.shape[1]),
            "codes_at": build_graph(work, threads),
            "vectors_at": _data_offset(work / "vectors.npy"),
        }
        (work / "stamp.json").write_text(json.dumps(meta), encoding="utf-8")
        work.replace(folder / name)
        pointer = folder / f".CURRENT-{name}"
        pointer.write_text(name, encoding="utf-8")
        pointer.replace(folder / "CURRENT")
        for old in folder.iterdir():  # a process that maps an old one keeps it until it lets go
            if old.is_dir() and old.name != name:
                shutil.rmtree(old, ignore_errors=True)
        return name


_COLUMNS = ("ids", "valid_from", "valid_to", "expires", "subjects", "subject_ends", "vectors")


def _data_offset(path: Path) -> int:
    """Where a .npy file's array starts (after its header)."""
    with path.open("rb") as handle:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            np.lib.format.read_array_header_1_0(handle)
        else:
            np.lib.format.read_array_header_2_0(handle)
        return handle.tell()
