-- engram-memory server store, schema 8: which reconciliation families each record belongs to.
-- A family is kept as a keyed digest of its ref in the record's scope (engine/admission/families.py),
-- never as the ref itself; a record's rows go when it is forgotten or tombstoned.
CREATE TABLE record_families (
    tenant      text COLLATE "C" NOT NULL,
    workspace   text COLLATE "C" NOT NULL,
    family_key  text COLLATE "C" NOT NULL,
    record_id   text COLLATE "C" NOT NULL,
    PRIMARY KEY (tenant, workspace, family_key, record_id)
);
CREATE INDEX record_families_by_record ON record_families (tenant, workspace, record_id);

ALTER TABLE record_families ENABLE ROW LEVEL SECURITY;
ALTER TABLE record_families FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON record_families
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));
