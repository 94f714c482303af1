-- engram-memory key vault (PostgreSQL), schema 5: signing people in and the OAuth clients that act for them.
-- Beside the revocations: a grant revoked here stays revoked whatever store backup is restored. Every
-- secret is kept as its SHA-256 digest only; passwords as argon2id hashes.

CREATE TABLE people (
    person_id               text COLLATE "C" PRIMARY KEY,
    email                   text COLLATE "C" NOT NULL UNIQUE,
    groups                  text COLLATE "C" NOT NULL,  -- JSON array, sorted
    password_hash           text COLLATE "C",
    enrolment_digest        text COLLATE "C" UNIQUE,
    enrolment_expires_at_ms bigint,
    created_at_ms           bigint NOT NULL,
    created_by              text COLLATE "C" NOT NULL,
    disabled_at_ms          bigint
);

CREATE TABLE oauth_clients (
    client_id           text COLLATE "C" PRIMARY KEY,
    metadata            text COLLATE "C" NOT NULL,
    secret_digest       text COLLATE "C",
    source              text COLLATE "C" NOT NULL CHECK (source IN ('registered', 'document')),
    registered_at_ms    bigint NOT NULL,
    revoked_at_ms       bigint
);

CREATE TABLE oauth_grants (
    grant_id            text COLLATE "C" PRIMARY KEY,
    client_id           text COLLATE "C" NOT NULL REFERENCES oauth_clients (client_id),
    principal           text COLLATE "C" NOT NULL,
    identity            text COLLATE "C" NOT NULL,
    workspace           text COLLATE "C" NOT NULL,
    scopes              text COLLATE "C" NOT NULL,  -- JSON array, sorted
    resource            text COLLATE "C" NOT NULL,
    created_at_ms       bigint NOT NULL,
    expires_at_ms       bigint NOT NULL,
    revoked_at_ms       bigint,
    revoked_reason      text COLLATE "C"
);
CREATE INDEX oauth_grants_by_principal ON oauth_grants (principal, created_at_ms);

CREATE TABLE oauth_codes (
    code_digest             text COLLATE "C" PRIMARY KEY,
    grant_id                text COLLATE "C" NOT NULL REFERENCES oauth_grants (grant_id),
    redirect_uri            text COLLATE "C" NOT NULL,
    redirect_uri_explicit   boolean NOT NULL,
    code_challenge          text COLLATE "C" NOT NULL,
    expires_at_ms           bigint NOT NULL,
    used_at_ms              bigint
);

CREATE TABLE oauth_refresh_tokens (
    token_digest        text COLLATE "C" PRIMARY KEY,
    grant_id            text COLLATE "C" NOT NULL REFERENCES oauth_grants (grant_id),
    issued_at_ms        bigint NOT NULL,
    expires_at_ms       bigint NOT NULL,
    used_at_ms          bigint
);

CREATE TABLE sign_in_sessions (
    session_digest      text COLLATE "C" PRIMARY KEY,
    identity            text COLLATE "C" NOT NULL,
    created_at_ms       bigint NOT NULL,
    expires_at_ms       bigint NOT NULL
);
