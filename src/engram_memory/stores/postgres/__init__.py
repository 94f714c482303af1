"""The server store: PostgreSQL through psycopg 3, with row-level security per tenant behind the engine's scoping."""
