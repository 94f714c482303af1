"""What one search asks a shared base's graph, and what the graph proposed: made under the scope's lock
by the index (vector_index.py), answered on the cache's helper thread while the search's lexical half
runs (semantic.py), and used under the lock again only for the state it was asked for."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from engram_memory.engine.recall.semantic_models import Matrix
from engram_memory.engine.recall.shared_index import Base

__all__ = ["GraphRequest", "Proposals"]


@dataclass(frozen=True, slots=True, eq=False)
class GraphRequest:
    """What one snapshot asks a base's graph (read under the scope's lock), answerable on any thread:
    the base's files are read-only but for erased rows, and `held` is this snapshot's own array."""

    base: Base
    version: int  # the index's, when asked: proposals are used only while it has not changed
    snapshot: tuple[int, int]  # (generation, valid time)
    held: npt.NDArray[np.bool_]
    k: int

    def asks_as(self, other: GraphRequest) -> bool:
        return (self.base, self.version, self.snapshot, self.k) == (other.base, other.version, other.snapshot, other.k)

    def propose(self, query: Matrix) -> Proposals:
        return Proposals(self, self.base.nearest_rows(query, self.held, self.k) if self.k > 0 else [])


@dataclass(frozen=True, slots=True, eq=False)
class Proposals:
    """The graph's rows for a request, found before the index was locked again."""

    request: GraphRequest
    rows: list[int]
