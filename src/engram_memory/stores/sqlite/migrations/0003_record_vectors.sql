-- engram-memory embedded store, schema 3: the semantic channel's index.
-- One embedding per accepted_current record, written at admission with its lexical entry and deleted
-- with it (forget, tombstone, any transition out of accepted_current). It is a derivative of the
-- plaintext, like the index tokens: secure_delete zeroes it when the row goes.
CREATE TABLE record_vectors (
    rid        INTEGER PRIMARY KEY,
    tenant     TEXT NOT NULL,
    workspace  TEXT NOT NULL,
    model      TEXT NOT NULL,
    vector     BLOB NOT NULL,
    subject    TEXT NOT NULL  -- the first index token of the primary text ("caroline" of "Caroline: ...")
);
CREATE INDEX record_vectors_by_scope ON record_vectors (tenant, workspace, model);
