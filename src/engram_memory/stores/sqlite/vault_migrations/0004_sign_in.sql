-- engram-memory key vault, schema 4: signing people in and the OAuth clients that act for them.
-- Beside the revocations: a grant revoked here stays revoked whatever store backup is restored. Every
-- secret is kept as its SHA-256 digest only; passwords as argon2id hashes.

CREATE TABLE people (
    person_id               TEXT    PRIMARY KEY,
    email                   TEXT    NOT NULL UNIQUE,
    groups                  TEXT    NOT NULL,  -- JSON array, sorted
    password_hash           TEXT,
    enrolment_digest        TEXT    UNIQUE,
    enrolment_expires_at_ms INTEGER,
    created_at_ms           INTEGER NOT NULL,
    created_by              TEXT    NOT NULL,
    disabled_at_ms          INTEGER
);

CREATE TABLE oauth_clients (
    client_id           TEXT    PRIMARY KEY,
    metadata            TEXT    NOT NULL,
    secret_digest       TEXT,
    source              TEXT    NOT NULL CHECK (source IN ('registered', 'document')),
    registered_at_ms    INTEGER NOT NULL,
    revoked_at_ms       INTEGER
);

CREATE TABLE oauth_grants (
    grant_id            TEXT    PRIMARY KEY,
    client_id           TEXT    NOT NULL REFERENCES oauth_clients (client_id),
    principal           TEXT    NOT NULL,
    identity            TEXT    NOT NULL,
    workspace           TEXT    NOT NULL,
    scopes              TEXT    NOT NULL,  -- JSON array, sorted
    resource            TEXT    NOT NULL,
    created_at_ms       INTEGER NOT NULL,
    expires_at_ms       INTEGER NOT NULL,
    revoked_at_ms       INTEGER,
    revoked_reason      TEXT
);
CREATE INDEX oauth_grants_by_principal ON oauth_grants (principal, created_at_ms);

CREATE TABLE oauth_codes (
    code_digest             TEXT    PRIMARY KEY,
    grant_id                TEXT    NOT NULL REFERENCES oauth_grants (grant_id),
    redirect_uri            TEXT    NOT NULL,
    redirect_uri_explicit   INTEGER NOT NULL,
    code_challenge          TEXT    NOT NULL,
    expires_at_ms           INTEGER NOT NULL,
    used_at_ms              INTEGER
);

CREATE TABLE oauth_refresh_tokens (
    token_digest        TEXT    PRIMARY KEY,
    grant_id            TEXT    NOT NULL REFERENCES oauth_grants (grant_id),
    issued_at_ms        INTEGER NOT NULL,
    expires_at_ms       INTEGER NOT NULL,
    used_at_ms          INTEGER
);

CREATE TABLE sign_in_sessions (
    session_digest      TEXT    PRIMARY KEY,
    identity            TEXT    NOT NULL,
    created_at_ms       INTEGER NOT NULL,
    expires_at_ms       INTEGER NOT NULL
);
