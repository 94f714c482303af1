"""Impact-ordered postings: how the embedded store finds a query's likely best memories without
scoring every memory that shares a common word with it.

Each posting is (scope, token, impact, record rowid), kept in impact order, written and deleted with
the record's FTS5 row. A search reads at most TERM_DEPTH postings per query term, best first, so its
cost no longer grows with how many memories hold the term. A term with no more postings than that is
read whole; deeper postings of a common term can only add that term's share to a memory that the
other terms did not already bring in. The engine re-scores the pool with exact BM25F.
"""

from __future__ import annotations

import hashlib
import itertools
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from engram_memory.engine.ports.lexical import FIELDS, term_impacts
from engram_memory.engine.ports.store import Scope
from engram_memory.stores.sql.postings import TERM_DEPTH, UNPOSTED, posted, weighted_terms

# Every index row with its scope and field texts, in rowid order.
INDEX_ROWS = (
    "SELECT f.rowid, r.tenant, r.workspace, "  # noqa: S608 (column names from FIELDS)
    + ", ".join(f"f.f_{name}" for name in FIELDS)
    + " FROM lexical_index AS f JOIN records AS r ON r.rid = f.rowid ORDER BY f.rowid"
)


def scope_key(scope: Scope) -> int:
    """A scope's 64-bit key in the postings tables (a collision could only widen a candidate pool: the
    records join checks tenant and workspace)."""
    return int.from_bytes(hashlib.sha256(scope.ref.encode("utf-8")).digest()[:8], "big", signed=True)


def add(db: sqlite3.Connection, scope: Scope, rid: int, fields: Mapping[str, str]) -> None:
    key = scope_key(scope)
    impacts = term_impacts(fields)
    db.executemany(
        "INSERT INTO lexical_index_postings (scope_key, term, neg_impact, rid) VALUES (?, ?, ?, ?)",
        [(key, term, -impact, rid) for term, impact in impacts.items() if term not in UNPOSTED],
    )
    db.executemany(
        "INSERT INTO lexical_index_terms (scope_key, term, docs) VALUES (?, ?, 1)"
        " ON CONFLICT (scope_key, term) DO UPDATE SET docs = docs + 1",
        [(key, term) for term in impacts],
    )


def drop(db: sqlite3.Connection, scope: Scope, rid: int, fields: Mapping[str, str]) -> None:
    """Deletes exactly what `add` wrote for these fields; a term held by no memory leaves no row."""
    key = scope_key(scope)
    impacts = term_impacts(fields)
    db.executemany(
        "DELETE FROM lexical_index_postings WHERE scope_key = ? AND term = ? AND neg_impact = ? AND rid = ?",
        [(key, term, -impact, rid) for term, impact in impacts.items() if term not in UNPOSTED],
    )
    db.executemany(
        "UPDATE lexical_index_terms SET docs = docs - 1 WHERE scope_key = ? AND term = ?",
        [(key, term) for term in impacts],
    )
    db.executemany(
        "DELETE FROM lexical_index_terms WHERE scope_key = ? AND term = ? AND docs <= 0",
        [(key, term) for term in impacts],
    )


class PendingPostings:
    """The postings of a batch's index writes, held back and written at its end in key order: each
    B-tree page then fills in order instead of being dirtied at random once per memory, and a term's
    count is written once per batch instead of once per memory. A savepoint that rolls back rewinds
    what it added (mark / rewind); unindexing a memory still pending cancels it instead of deleting."""

    def __init__(self) -> None:
        # (rid, scope key, term impacts), or (rid, 0, None) when a pending memory is unindexed again.
        self._log: list[tuple[int, int, dict[str, int] | None]] = []
        self.flushes = 0  # a savepoint that rolls back across a flush cannot rewind it (see the store)

    def mark(self) -> int:
        return len(self._log)

    def rewind(self, mark: int) -> None:
        del self._log[mark:]

    def add(self, scope: Scope, rid: int, fields: Mapping[str, str]) -> None:
        self._log.append((rid, scope_key(scope), term_impacts(fields)))

    def cancel(self, rid: int) -> bool:
        """True when the memory's postings were still pending (and now never will be written)."""
        for held, _, impacts in reversed(self._log):
            if held == rid:
                if impacts is None:
                    return False
                self._log.append((rid, 0, None))
                return True
        return False

    def flush(self, db: sqlite3.Connection) -> None:
        pending: dict[int, tuple[int, dict[str, int]]] = {}
        for rid, key, impacts in self._log:
            if impacts is None:
                pending.pop(rid, None)
            else:
                pending[rid] = (key, impacts)
        self._log.clear()
        self.flushes += 1
        rows = sorted(
            (key, term, -impact, rid)
            for rid, (key, impacts) in pending.items()
            for term, impact in impacts.items()
            if term not in UNPOSTED
        )
        db.executemany(
            "INSERT INTO lexical_index_postings (scope_key, term, neg_impact, rid) VALUES (?, ?, ?, ?)", rows
        )
        counts: dict[tuple[int, str], int] = {}
        for key, impacts in pending.values():
            for term in impacts:
                counts[(key, term)] = counts.get((key, term), 0) + 1
        db.executemany(
            "INSERT INTO lexical_index_terms (scope_key, term, docs) VALUES (?, ?, ?)"
            " ON CONFLICT (scope_key, term) DO UPDATE SET docs = docs + excluded.docs",
            [(key, term, docs) for (key, term), docs in sorted(counts.items())],
        )


def doc_counts(db: sqlite3.Connection, scope: Scope, terms: Sequence[str]) -> dict[str, int]:
    key = scope_key(scope)
    counts = dict.fromkeys(terms, 0)
    for term in counts:
        row = db.execute(
            "SELECT docs FROM lexical_index_terms WHERE scope_key = ? AND term = ?", (key, term)
        ).fetchone()
        if row is not None:
            counts[term] = int(row[0])
    return counts


# One term's postings, best first and at most TERM_DEPTH of them, as one text "rid,neg_impact,rid,...":
# read as one value, not a row per posting (the order inside does not matter: the shares are summed).
_TERM_LIST = (
    "SELECT group_concat(rid || ',' || neg_impact) FROM (SELECT rid, neg_impact FROM lexical_index_postings"
    " WHERE scope_key = ? AND term = ? ORDER BY neg_impact, rid LIMIT ?)"
)


def best(db: sqlite3.Connection, scope: Scope, terms: Sequence[str], doc_count: int, limit: int) -> list[int]:
    """The rowids of the `limit` memories with the most idf-weighted impact over the postings read
    (ties by rowid), best first. Each term's list arrives as one text and is summed with numpy: SQLite's
    GROUP BY sorted every posting read (four common terms: 20,000 rows, three quarters of the time)."""
    key = scope_key(scope)
    counts = doc_counts(db, scope, terms)
    rids: list[npt.NDArray[np.int64]] = []
    shares: list[npt.NDArray[np.float64]] = []
    for term, weight in weighted_terms(counts, doc_count):
        text = db.execute(_TERM_LIST, (key, term, TERM_DEPTH)).fetchone()[0]
        if text:
            pairs = np.fromstring(text, dtype=np.int64, sep=",").reshape(-1, 2)
            rids.append(pairs[:, 0])
            shares.append(pairs[:, 1].astype(np.float64) * weight)
    if not rids:
        return []
    ids, where = np.unique(np.concatenate(rids), return_inverse=True)
    totals = np.bincount(where, weights=np.concatenate(shares))  # summed in term order: equal memories tie
    return [int(rid) for rid in ids[np.lexsort((ids, totals))[:limit]]]


def consistent(db: sqlite3.Connection) -> bool:
    """Whether the postings and term counts are exactly what the FTS5 rows imply (the store's own check;
    streams both sides in rowid order, so memory stays flat however large the store)."""
    rows = db.execute(INDEX_ROWS)
    expected_counts: dict[tuple[int, str], int] = {}

    def expected() -> Iterator[tuple[int, int, str, int]]:
        for rid, tenant, workspace, *texts in rows:
            key = scope_key(Scope(tenant=str(tenant), workspace=str(workspace)))
            impacts = term_impacts({name: str(text or "") for name, text in zip(FIELDS, texts, strict=True)})
            for term in impacts:
                expected_counts[(key, term)] = expected_counts.get((key, term), 0) + 1
            for term in sorted(impacts):
                if term not in UNPOSTED:
                    yield (int(rid), key, term, -impacts[term])

    stored = db.execute("SELECT rid, scope_key, term, neg_impact FROM lexical_index_postings ORDER BY rid, term")
    for want, have in itertools.zip_longest(expected(), stored):
        if have is None or want != tuple(have):
            return False
    counts = db.execute("SELECT scope_key, term, docs FROM lexical_index_terms").fetchall()
    return {(int(key), str(term)): int(docs) for key, term, docs in counts} == expected_counts


def backfill(db: sqlite3.Connection, rows: Iterable[Sequence[object]]) -> int:
    """Writes the postings of index rows (rowid, tenant, workspace, field texts in FIELDS order) that
    a store indexed before it kept postings; returns how many rows it wrote for."""
    written = 0
    for row in rows:
        rid, tenant, workspace, *texts = row
        fields = {name: str(text or "") for name, text in zip(FIELDS, texts, strict=True)}
        add(db, Scope(tenant=str(tenant), workspace=str(workspace)), int(str(rid)), fields)
        written += 1
    return written


__all__ = [
    "INDEX_ROWS",
    "TERM_DEPTH",
    "UNPOSTED",
    "PendingPostings",
    "add",
    "backfill",
    "best",
    "consistent",
    "doc_counts",
    "drop",
    "posted",
    "scope_key",
]
