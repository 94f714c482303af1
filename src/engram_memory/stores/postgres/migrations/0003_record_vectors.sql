-- engram-memory server store, schema 3: the semantic channel's index.
-- One embedding per accepted_current record, written at admission with its lexical entry and deleted
-- with it. It is a derivative of the plaintext, like the index tokens, so the owner's erasure pass
-- rewrites this table too (VACUUM FULL) after a forget, and tenants see only their own rows.
CREATE TABLE record_vectors (
    rid        bigint PRIMARY KEY,
    tenant     text COLLATE "C" NOT NULL,
    workspace  text COLLATE "C" NOT NULL,
    model      text COLLATE "C" NOT NULL,
    vector     bytea NOT NULL,
    subject    text COLLATE "C" NOT NULL  -- the first index token of the primary text
);
CREATE INDEX record_vectors_by_scope ON record_vectors (tenant, workspace, model);

ALTER TABLE record_vectors ENABLE ROW LEVEL SECURITY;
ALTER TABLE record_vectors FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON record_vectors
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));
