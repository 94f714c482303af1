-- engram-memory embedded store, schema 1.
-- The journal is the truth; every other table is a projection updated in the same transaction.

CREATE TABLE scopes (
    tenant          TEXT    NOT NULL,
    workspace       TEXT    NOT NULL,
    head_cursor     INTEGER NOT NULL,
    head_digest     TEXT    NOT NULL,
    records_cursor  INTEGER NOT NULL,
    doc_count       INTEGER NOT NULL DEFAULT 0,
    len_primary     INTEGER NOT NULL DEFAULT 0,
    len_decision    INTEGER NOT NULL DEFAULT 0,
    len_evidence    INTEGER NOT NULL DEFAULT 0,
    len_context     INTEGER NOT NULL DEFAULT 0,
    len_citations   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, workspace)
) WITHOUT ROWID;

CREATE TABLE journal (
    tenant          TEXT    NOT NULL,
    workspace       TEXT    NOT NULL,
    cursor          INTEGER NOT NULL CHECK (cursor >= 1),
    event_id        TEXT    NOT NULL UNIQUE,
    kind            TEXT    NOT NULL,
    at_ms           INTEGER NOT NULL,
    body            TEXT    NOT NULL,
    prev_digest     TEXT    NOT NULL,
    event_digest    TEXT    NOT NULL,
    affects_records INTEGER NOT NULL,
    PRIMARY KEY (tenant, workspace, cursor)
) WITHOUT ROWID;

CREATE TRIGGER journal_is_append_only_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'journal is append-only'); END;
CREATE TRIGGER journal_is_append_only_delete BEFORE DELETE ON journal
BEGIN SELECT RAISE(ABORT, 'journal is append-only'); END;

CREATE TABLE candidates (
    candidate_id      TEXT    PRIMARY KEY,
    tenant            TEXT    NOT NULL,
    workspace         TEXT    NOT NULL,
    state             TEXT    NOT NULL,
    payload_digest    TEXT    NOT NULL,
    evidence_digest   TEXT    NOT NULL,
    principal         TEXT    NOT NULL,
    agent_id          TEXT    NOT NULL,
    session           TEXT    NOT NULL,
    captured_at_ms    INTEGER NOT NULL,
    capture_cursor    INTEGER NOT NULL,
    size_bytes        INTEGER NOT NULL,
    citation_count    INTEGER NOT NULL,
    has_attestation   INTEGER NOT NULL,
    secret_categories TEXT    NOT NULL,
    adjudication      INTEGER NOT NULL DEFAULT 0,
    record_id         TEXT
);
CREATE INDEX candidates_by_scope ON candidates (tenant, workspace, state);

CREATE TABLE records (
    rid             INTEGER PRIMARY KEY,
    record_id       TEXT    NOT NULL UNIQUE,
    tenant          TEXT    NOT NULL,
    workspace       TEXT    NOT NULL,
    candidate_id    TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    payload_digest  TEXT    NOT NULL,
    valid_from_ms   INTEGER NOT NULL,
    valid_to_ms     INTEGER,
    expires_at_ms   INTEGER,
    admitted_at_ms  INTEGER NOT NULL,
    state_cursor    INTEGER NOT NULL,
    principal       TEXT    NOT NULL,
    agent_id        TEXT    NOT NULL,
    session         TEXT    NOT NULL,
    captured_at_ms  INTEGER NOT NULL
);
CREATE INDEX records_by_digest ON records (tenant, workspace, payload_digest, state);

-- Ciphertext only: each body's data key lives in the host's key vault, outside this file.
CREATE TABLE sealed_bodies (
    owner_id     TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    workspace    TEXT NOT NULL,
    nonce        BLOB NOT NULL,
    ciphertext   BLOB NOT NULL
);

CREATE VIRTUAL TABLE lexical_index USING fts5(
    scope, f_primary, f_decision, f_evidence, f_context, f_citations,
    tokenize = 'unicode61 remove_diacritics 0'
);

CREATE TABLE tombstones (
    tenant          TEXT    NOT NULL,
    workspace       TEXT    NOT NULL,
    payload_digest  TEXT    NOT NULL,
    at_ms           INTEGER NOT NULL,
    PRIMARY KEY (tenant, workspace, payload_digest)
) WITHOUT ROWID;

CREATE TABLE idempotency (
    tenant            TEXT    NOT NULL,
    workspace         TEXT    NOT NULL,
    principal         TEXT    NOT NULL,
    idem_key          TEXT    NOT NULL,
    tool              TEXT    NOT NULL,
    operation_digest  TEXT    NOT NULL,
    target            TEXT    NOT NULL,
    response          TEXT    NOT NULL,
    created_at_ms     INTEGER NOT NULL,
    PRIMARY KEY (tenant, workspace, principal, idem_key)
) WITHOUT ROWID;

CREATE TABLE confirmations (
    confirmation_id         TEXT    PRIMARY KEY,
    tenant                  TEXT    NOT NULL,
    workspace               TEXT    NOT NULL,
    principal               TEXT    NOT NULL,
    agent_id                TEXT    NOT NULL,
    session                 TEXT    NOT NULL,
    tool                    TEXT    NOT NULL,
    target                  TEXT    NOT NULL,
    operation_digest        TEXT    NOT NULL,
    reason_ref              TEXT,
    summary                 TEXT    NOT NULL,
    status                  TEXT    NOT NULL,
    requested_at_ms         INTEGER NOT NULL,
    decided_at_ms           INTEGER,
    decided_by              TEXT,
    approval_expires_at_ms  INTEGER,
    consumed_at_ms          INTEGER
);
CREATE INDEX confirmations_by_operation
    ON confirmations (tenant, workspace, principal, tool, target, operation_digest);
CREATE INDEX confirmations_by_status ON confirmations (status, requested_at_ms);

CREATE TABLE audit_log (
    seq              INTEGER PRIMARY KEY,
    audit_id         TEXT    NOT NULL UNIQUE,
    at_ms            INTEGER NOT NULL,
    tool             TEXT    NOT NULL,
    outcome          TEXT    NOT NULL,
    tenant           TEXT,
    workspace        TEXT,
    principal        TEXT,
    agent_id         TEXT,
    session          TEXT,
    token_id         TEXT,
    request_digest   TEXT,
    response_digest  TEXT
);
