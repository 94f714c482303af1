-- engram-memory key vault (PostgreSQL), schema 1: data keys live here, in a database of their own,
-- never in the store's database, so no dump of the store can carry a key.

CREATE TABLE data_keys (
    owner_id       text COLLATE "C" PRIMARY KEY,
    tenant         text COLLATE "C" NOT NULL,
    workspace      text COLLATE "C" NOT NULL,
    kek_id         text COLLATE "C" NOT NULL,
    wrapped        bytea  NOT NULL,
    created_at_ms  bigint NOT NULL
);
CREATE INDEX data_keys_by_kek ON data_keys (kek_id);
CREATE INDEX data_keys_by_age ON data_keys (created_at_ms);

-- Which keys were destroyed, and when: ids only. A restore of an older backup reads it to know
-- that a body it brings back was deliberately shredded rather than lost.
CREATE TABLE shredded (
    owner_id          text COLLATE "C" PRIMARY KEY,
    tenant            text COLLATE "C" NOT NULL,
    workspace         text COLLATE "C" NOT NULL,
    destroyed_at_ms   bigint NOT NULL
);
