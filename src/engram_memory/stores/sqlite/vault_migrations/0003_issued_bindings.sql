-- engram-memory key vault, schema 3: the bindings this home issued (their claims, never the token).
-- Beside the revocations, so `bindings list` shows both, and revoking an id no one issued is an error.

CREATE TABLE issued_bindings (
    token_id            TEXT    PRIMARY KEY,
    tenant              TEXT    NOT NULL,
    workspace           TEXT    NOT NULL,
    principal           TEXT    NOT NULL,
    agent_id            TEXT    NOT NULL,
    session             TEXT    NOT NULL,
    purpose_ref         TEXT    NOT NULL,
    grants              TEXT    NOT NULL,  -- JSON array of tool names, sorted
    confirm_mutations   INTEGER NOT NULL,
    trust_class         TEXT    NOT NULL,
    issued_at_ms        INTEGER NOT NULL,
    expires_at_ms       INTEGER NOT NULL,
    issued_by           TEXT    NOT NULL
);
CREATE INDEX issued_bindings_by_time ON issued_bindings (issued_at_ms, token_id);
