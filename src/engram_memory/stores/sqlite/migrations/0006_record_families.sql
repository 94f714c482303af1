-- engram-memory embedded store, schema 6: which reconciliation families each record belongs to.
-- A family is kept as a keyed digest of its ref in the record's scope (engine/admission/families.py),
-- never as the ref itself; a record's rows go when it is forgotten or tombstoned.
CREATE TABLE record_families (
    tenant      TEXT NOT NULL,
    workspace   TEXT NOT NULL,
    family_key  TEXT NOT NULL,
    record_id   TEXT NOT NULL,
    PRIMARY KEY (tenant, workspace, family_key, record_id)
) WITHOUT ROWID;
CREATE INDEX record_families_by_record ON record_families (tenant, workspace, record_id);
