-- engram-memory key vault (PostgreSQL), schema 3: row-level security per tenant, as in the store.
-- The runtime role reads and adds data keys of the tenant its transaction names. Destroying keys is
-- the one thing it may do by id alone (a forget knows the record id, not where the vault keeps it):
-- through engram_destroy_data_keys, which runs as the vault's owner and can only ever erase.

ALTER TABLE data_keys ENABLE ROW LEVEL SECURITY;
ALTER TABLE data_keys FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON data_keys
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

ALTER TABLE shredded ENABLE ROW LEVEL SECURITY;
ALTER TABLE shredded FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON shredded
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

-- Records each destroyed id, deletes the keys, and answers how many of them are still there (0 when done).
CREATE FUNCTION engram_destroy_data_keys(owner_ids text[], at_ms bigint) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $$
    INSERT INTO shredded (owner_id, tenant, workspace, destroyed_at_ms)
        SELECT owner_id, tenant, workspace, at_ms FROM data_keys WHERE owner_id = ANY (owner_ids)
        ON CONFLICT (owner_id) DO NOTHING;
    DELETE FROM data_keys WHERE owner_id = ANY (owner_ids);
    SELECT count(*) FROM data_keys WHERE owner_id = ANY (owner_ids);
$$;
REVOKE ALL ON FUNCTION engram_destroy_data_keys(text[], bigint) FROM PUBLIC;
