-- engram-memory key vault, schema 2: binding revocations.
-- They live beside the keys, not in the store, so restoring an older store backup can never bring a
-- revoked binding back to life.

CREATE TABLE revocations (
    token_id        TEXT    PRIMARY KEY,
    revoked_at_ms   INTEGER NOT NULL,
    revoked_by      TEXT    NOT NULL
);
