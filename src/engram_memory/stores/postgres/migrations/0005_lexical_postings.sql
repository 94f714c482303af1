-- engram-memory server store, schema 5: impact-ordered postings beside the tsvector index, as the
-- embedded store keeps them (stores/sql/postings.py). A search reads at most a few thousand postings
-- per query term through these B-trees, whose equality and order operators are leakproof, so the
-- runtime role's plan under row-level security is the owner's; GIN matches are not (`@@` is not
-- leakproof), and under row-level security they scanned the whole index. Keyed by tenant first.
-- Terms are tokens of plaintext, like the index: the owner's erasure pass rewrites these tables too.
-- A store indexed before this schema gets its postings derived once, by the owner, when it opens.
CREATE TABLE lexical_postings (
    tenant      text COLLATE "C" NOT NULL,
    workspace   text COLLATE "C" NOT NULL,
    term        text COLLATE "C" NOT NULL,
    neg_impact  integer NOT NULL,
    rid         bigint  NOT NULL,
    PRIMARY KEY (tenant, workspace, term, neg_impact, rid)
);

-- How many of a scope's indexed memories hold each term (stop words included): the idf statistics.
CREATE TABLE lexical_terms (
    tenant      text COLLATE "C" NOT NULL,
    workspace   text COLLATE "C" NOT NULL,
    term        text COLLATE "C" NOT NULL,
    docs        bigint  NOT NULL CHECK (docs > 0),
    PRIMARY KEY (tenant, workspace, term)
);

ALTER TABLE lexical_postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE lexical_postings FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON lexical_postings
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

ALTER TABLE lexical_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE lexical_terms FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON lexical_terms
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));
