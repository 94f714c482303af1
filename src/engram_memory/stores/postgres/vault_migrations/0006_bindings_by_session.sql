-- engram-memory key vault (PostgreSQL), schema 6: a grant's access tokens found by its id (their session),
-- so revoking a grant does not read every binding the home ever issued.

CREATE INDEX issued_bindings_by_session ON issued_bindings (session, expires_at_ms);
