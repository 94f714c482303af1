-- engram-memory server store, schema 10: tenants moved to another cluster (`engram-memory tenants move`).
-- Once a tenant's row is here, no transaction of this database may write for it again: every writer that
-- names its tenant calls engram_tenant_here first, which then raises (SQLSTATE EM001, retriable for the
-- agent, whose next try goes where the host's routing map now sends the tenant).
CREATE TABLE tenant_moves (
    moved_tenant text  PRIMARY KEY,  -- not `tenant`: no tenant's row, and never copied with one
    moved_to     text  NOT NULL,
    moved_at_ms  bigint NOT NULL
);

CREATE FUNCTION engram_tenant_here(wanted text) RETURNS boolean
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM tenant_moves WHERE moved_tenant = wanted) THEN
        RAISE EXCEPTION 'this tenant was moved to another cluster' USING ERRCODE = 'EM001';
    END IF;
    RETURN true;
END
$$;
