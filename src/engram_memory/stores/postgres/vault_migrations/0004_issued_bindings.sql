-- engram-memory key vault (PostgreSQL), schema 4: the bindings this home issued (their claims, never the token).
-- Beside the revocations, so `bindings list` shows both, and revoking an id no one issued is an error.

CREATE TABLE issued_bindings (
    token_id            text COLLATE "C" PRIMARY KEY,
    tenant              text COLLATE "C" NOT NULL,
    workspace           text COLLATE "C" NOT NULL,
    principal           text COLLATE "C" NOT NULL,
    agent_id            text COLLATE "C" NOT NULL,
    session             text COLLATE "C" NOT NULL,
    purpose_ref         text COLLATE "C" NOT NULL,
    grants              text COLLATE "C" NOT NULL,  -- JSON array of tool names, sorted
    confirm_mutations   boolean NOT NULL,
    trust_class         text COLLATE "C" NOT NULL,
    issued_at_ms        bigint NOT NULL,
    expires_at_ms       bigint NOT NULL,
    issued_by           text COLLATE "C" NOT NULL
);
CREATE INDEX issued_bindings_by_time ON issued_bindings (issued_at_ms, token_id);
