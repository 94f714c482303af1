-- engram-memory key vault (PostgreSQL), schema 2: binding revocations.
-- They live beside the keys, not in the store, so restoring an older store backup can never bring a
-- revoked binding back to life.

CREATE TABLE revocations (
    token_id        text COLLATE "C" PRIMARY KEY,
    revoked_at_ms   bigint NOT NULL,
    revoked_by      text COLLATE "C" NOT NULL
);
