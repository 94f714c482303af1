-- engram-memory server store, schema 2: row-level security per tenant, a second wall behind the engine's scoping.
-- Every transaction names its tenant with set_config('app.tenant', ..., true); the runtime role sees and
-- writes only that tenant's rows. FORCE applies the policies to the tables' owner too: only a role with
-- BYPASSRLS (the owner role that migrates and runs the host's commands) sees across tenants.
-- An unset setting reads as NULL (or '' once a transaction-local value has ended): it matches no row.

ALTER TABLE scopes ENABLE ROW LEVEL SECURITY;
ALTER TABLE scopes FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON scopes
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

ALTER TABLE journal ENABLE ROW LEVEL SECURITY;
ALTER TABLE journal FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON journal
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

ALTER TABLE candidates ENABLE ROW LEVEL SECURITY;
ALTER TABLE candidates FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON candidates
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

ALTER TABLE records ENABLE ROW LEVEL SECURITY;
ALTER TABLE records FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON records
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

ALTER TABLE sealed_bodies ENABLE ROW LEVEL SECURITY;
ALTER TABLE sealed_bodies FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON sealed_bodies
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

ALTER TABLE lexical_index ENABLE ROW LEVEL SECURITY;
ALTER TABLE lexical_index FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON lexical_index
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

ALTER TABLE tombstones ENABLE ROW LEVEL SECURITY;
ALTER TABLE tombstones FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON tombstones
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

ALTER TABLE idempotency ENABLE ROW LEVEL SECURITY;
ALTER TABLE idempotency FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON idempotency
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

ALTER TABLE confirmations ENABLE ROW LEVEL SECURITY;
ALTER TABLE confirmations FORCE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON confirmations
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''))
    WITH CHECK (tenant = NULLIF(current_setting('app.tenant', true), ''));

-- A call the server could not bind to a tenant is still audited (tenant NULL); reading is per tenant.
ALTER TABLE audit_log ENABLE ROW LEVEL SECURITY;
ALTER TABLE audit_log FORCE ROW LEVEL SECURITY;
CREATE POLICY audit_append ON audit_log FOR INSERT
    WITH CHECK (tenant IS NULL OR tenant = NULLIF(current_setting('app.tenant', true), ''));
CREATE POLICY audit_read ON audit_log FOR SELECT
    USING (tenant = NULLIF(current_setting('app.tenant', true), ''));
