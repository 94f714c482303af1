"""The server store's impact-ordered postings (schema 5): written and deleted with each index row, read by
search through B-trees whose operators are leakproof, so row-level security keeps the owner's plan.

The rows and the ranking are the embedded store's (stores/sqlite/postings.py, stores/sql/postings.py):
the same terms, impacts, depth and order, so both stores hand the engine the same candidates.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence

from engram_memory.engine.ports.lexical import FIELDS
from engram_memory.engine.ports.store import Scope
from engram_memory.stores.postgres.connection import PsycopgConnection
from engram_memory.stores.sql.postings import TERM_DEPTH, impacts_of, weighted_terms

# Every index row of a record with its scope and field texts, in rid order (for the backfill and the
# check; a row of no record is the verifier's row count's to name, as on the embedded store).
INDEX_ROWS = (
    "SELECT f.rid, r.tenant, r.workspace, "  # noqa: S608 (column names from FIELDS)
    + ", ".join(f"f.f_{name}" for name in FIELDS)
    + " FROM lexical_index AS f JOIN records AS r ON r.rid = f.rid ORDER BY f.rid"
)


def add(db: PsycopgConnection, scope: Scope, rid: int, fields: Mapping[str, str]) -> None:
    impacts, rows = impacts_of(fields)
    t, w = scope.tenant, scope.workspace
    if rows:  # one statement for all of a record's postings, not one per term
        db.execute(
            "INSERT INTO lexical_postings (tenant, workspace, term, neg_impact, rid)"
            " SELECT ?, ?, term, neg_impact, ? FROM unnest(?::text[], ?::integer[]) AS p (term, neg_impact)",
            (t, w, rid, *_columns(rows)),
        )
    db.execute(
        "INSERT INTO lexical_terms (tenant, workspace, term, docs) SELECT ?, ?, term, 1 FROM unnest(?::text[]) AS term"
        " ON CONFLICT (tenant, workspace, term) DO UPDATE SET docs = lexical_terms.docs + 1",
        (t, w, sorted(impacts)),
    )


def _columns(rows: Sequence[tuple[str, int]]) -> tuple[list[str], list[int]]:
    """The (term, negated impact) rows as the two arrays an `unnest` takes."""
    return [term for term, _ in rows], [neg for _, neg in rows]


def drop(db: PsycopgConnection, scope: Scope, rid: int, fields: Mapping[str, str]) -> None:
    """Deletes exactly what `add` wrote for these fields; a term held by no memory leaves no row."""
    impacts, rows = impacts_of(fields)
    t, w = scope.tenant, scope.workspace
    if rows:
        db.execute(
            "DELETE FROM lexical_postings AS l USING unnest(?::text[], ?::integer[]) AS p (term, neg_impact)"
            " WHERE l.tenant = ? AND l.workspace = ? AND l.term = p.term AND l.neg_impact = p.neg_impact"
            " AND l.rid = ?",
            (*_columns(rows), t, w, rid),
        )
    terms = sorted(impacts)
    db.execute(
        "DELETE FROM lexical_terms WHERE tenant = ? AND workspace = ? AND term = ANY (?::text[]) AND docs <= 1",
        (t, w, terms),
    )
    db.execute(
        "UPDATE lexical_terms SET docs = docs - 1 WHERE tenant = ? AND workspace = ? AND term = ANY (?::text[])",
        (t, w, terms),
    )


def doc_counts(db: PsycopgConnection, scope: Scope, terms: Sequence[str]) -> dict[str, int]:
    counts = dict.fromkeys(terms, 0)
    if not counts:
        return counts
    rows = db.execute(
        "SELECT term, docs FROM lexical_terms WHERE tenant = ? AND workspace = ? AND term = ANY (?::text[])",
        (scope.tenant, scope.workspace, list(counts)),
    ).fetchall()
    counts.update({str(row[0]): int(row[1]) for row in rows})
    return counts


def best(db: PsycopgConnection, scope: Scope, counts: Mapping[str, int], doc_count: int, limit: int) -> list[int]:
    """The rids of the `limit` memories with the most idf-weighted impact over the postings read (ties by
    rid), best first: each term's list (`counts`: the posted terms, with how many memories hold each) is
    read in impact order up to TERM_DEPTH, merged by the server."""
    weighted = weighted_terms(counts, doc_count)
    if not weighted:
        return []
    lists = " UNION ALL ".join(
        "(SELECT rid, neg_impact * ?::float8 AS share FROM lexical_postings"
        " WHERE tenant = ? AND workspace = ? AND term = ? ORDER BY neg_impact, rid LIMIT ?)"
        for _ in weighted
    )
    params: list[object] = []
    for term, weight in weighted:
        params += [weight, scope.tenant, scope.workspace, term, TERM_DEPTH]
    rows = db.execute(
        f"SELECT rid FROM ({lists}) AS p GROUP BY rid ORDER BY sum(share), rid LIMIT ?",  # noqa: S608
        [*params, limit],
    ).fetchall()
    return [int(row[0]) for row in rows]


def _expected(
    rows: Iterable[Sequence[object]], counts: dict[tuple[str, str, str], int]
) -> Iterator[tuple[object, ...]]:
    for rid, tenant, workspace, *texts in rows:
        impacts, posted = impacts_of({name: str(text or "") for name, text in zip(FIELDS, texts, strict=True)})
        for term in impacts:
            key = (str(tenant), str(workspace), term)
            counts[key] = counts.get(key, 0) + 1
        for term, neg in posted:
            yield (int(str(rid)), str(tenant), str(workspace), term, neg)


def consistent(db: PsycopgConnection) -> bool:
    """Whether the postings and term counts are exactly what the index rows imply (streamed in rid order,
    so memory stays flat however large the store)."""
    counts: dict[tuple[str, str, str], int] = {}
    want = _expected(db.execute(INDEX_ROWS), counts)
    have = db.execute(
        'SELECT rid, tenant, workspace, term, neg_impact FROM lexical_postings ORDER BY rid, term COLLATE "C"'
    )
    for expected, stored in itertools.zip_longest(want, have):
        if stored is None or expected != tuple(stored):
            return False
    stored_counts = db.execute("SELECT tenant, workspace, term, docs FROM lexical_terms").fetchall()
    return {(str(t), str(w), str(term)): int(docs) for t, w, term, docs in stored_counts} == counts


def backfill(db: PsycopgConnection) -> int:
    """Writes the postings of index rows a store indexed before schema 5; returns how many rows it wrote for."""
    written = 0
    for rid, tenant, workspace, *texts in db.execute(INDEX_ROWS).fetchall():
        fields = {name: str(text or "") for name, text in zip(FIELDS, texts, strict=True)}
        add(db, Scope(tenant=str(tenant), workspace=str(workspace)), int(rid), fields)
        written += 1
    return written
