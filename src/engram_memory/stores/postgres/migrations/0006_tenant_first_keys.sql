-- engram-memory server store, schema 6: every tenant table keyed by tenant first.
-- A table partitioned by hash of tenant (PARTITION BY HASH (tenant), or a Citus distribution column)
-- may only keep unique keys that hold the tenant, so the tables keyed by an id alone are
-- re-keyed (tenant, id). Ids stay globally unique (random, or one identity sequence); the plain indexes
-- on the id alone serve the host's lookups by id, which name no tenant. The hot paths name the tenant
-- and use the new keys. audit_log (calls without a binding have no tenant) and erasure_requests (which
-- name nobody) are the host's own tables, not the tenants'.
ALTER TABLE journal DROP CONSTRAINT journal_event_id_key, ADD UNIQUE (tenant, event_id);

ALTER TABLE candidates DROP CONSTRAINT candidates_pkey, ADD PRIMARY KEY (tenant, candidate_id);
CREATE INDEX candidates_by_id ON candidates (candidate_id);

ALTER TABLE records DROP CONSTRAINT records_pkey, ADD PRIMARY KEY (tenant, rid);
ALTER TABLE records DROP CONSTRAINT records_record_id_key, ADD UNIQUE (tenant, record_id);
CREATE INDEX records_by_record_id ON records (record_id);

ALTER TABLE sealed_bodies DROP CONSTRAINT sealed_bodies_pkey, ADD PRIMARY KEY (tenant, owner_id);
CREATE INDEX sealed_bodies_by_owner ON sealed_bodies (owner_id);

ALTER TABLE lexical_index DROP CONSTRAINT lexical_index_pkey, ADD PRIMARY KEY (tenant, rid);

ALTER TABLE record_vectors DROP CONSTRAINT record_vectors_pkey, ADD PRIMARY KEY (tenant, rid);

ALTER TABLE confirmations DROP CONSTRAINT confirmations_pkey, ADD PRIMARY KEY (tenant, confirmation_id);
CREATE INDEX confirmations_by_id ON confirmations (confirmation_id);
