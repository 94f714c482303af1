-- engram-memory embedded store, schema 4: impact-ordered postings beside the FTS5 index.
-- FTS5 must score every match of a query to find its best ones, so a common term costs the whole scope.
-- These tables hold each indexed token of each accepted_current record with its impact (see
-- engine/ranking.py term_impacts), so a search reads only the best postings of each term, and each
-- term's document count per scope. Both are derived from the index rows (written and deleted with
-- them, rebuilt by a restore) and, like them, never archived. A scope is keyed by a 64-bit hash of
-- its ref; the records join re-checks tenant and workspace. Rows of a store indexed before this
-- schema are filled in by the store when it opens (stores/sqlite/postings.py).
CREATE TABLE lexical_index_postings (
    scope_key   INTEGER NOT NULL,
    term        TEXT    NOT NULL,
    neg_impact  INTEGER NOT NULL,
    rid         INTEGER NOT NULL,
    PRIMARY KEY (scope_key, term, neg_impact, rid)
) WITHOUT ROWID;

CREATE TABLE lexical_index_terms (
    scope_key  INTEGER NOT NULL,
    term       TEXT    NOT NULL,
    docs       INTEGER NOT NULL,
    PRIMARY KEY (scope_key, term)
) WITHOUT ROWID;
