-- engram-memory key vault (PostgreSQL), schema 7: the team provider's refresh token, sealed, beside the
-- browser session that signed in through it and the grant made from that session, so each refresh of the
-- grant asks the provider again (a person it dropped, or whose groups changed, loses access then).

ALTER TABLE sign_in_sessions ADD COLUMN upstream_token text;
ALTER TABLE oauth_grants ADD COLUMN upstream_token text;
