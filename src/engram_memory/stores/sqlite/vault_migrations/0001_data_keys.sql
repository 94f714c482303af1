-- engram-memory key vault, schema 1: data keys live here, never in the store or its backups.

CREATE TABLE data_keys (
    owner_id       TEXT    PRIMARY KEY,
    tenant         TEXT    NOT NULL,
    workspace      TEXT    NOT NULL,
    kek_id         TEXT    NOT NULL,
    wrapped        BLOB    NOT NULL,
    created_at_ms  INTEGER NOT NULL
);
CREATE INDEX data_keys_by_kek ON data_keys (kek_id);
CREATE INDEX data_keys_by_age ON data_keys (created_at_ms);

-- Which keys were destroyed, and when: ids only. A restore of an older backup reads it to know
-- that a body it brings back was deliberately shredded rather than lost.
CREATE TABLE shredded (
    owner_id          TEXT    PRIMARY KEY,
    tenant            TEXT    NOT NULL,
    workspace         TEXT    NOT NULL,
    destroyed_at_ms   INTEGER NOT NULL
);
