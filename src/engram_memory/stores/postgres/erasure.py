"""Pushing erased bodies and index tokens out of the PostgreSQL store's live files (the owner's VACUUM)."""

from __future__ import annotations

from engram_memory.stores.postgres.connection import Connection, PsycopgConnection

# The tables that held erased bodies and index rows: VACUUM removes their dead row versions.
ERASED_TABLES = ("sealed_bodies", "lexical_index", "lexical_postings", "lexical_terms", "record_vectors")
# Of those, the tables whose rows are plaintext tokens or their derivatives: rewritten after an erasure.
REWRITTEN_TABLES = ("lexical_index", "lexical_postings", "lexical_terms", "record_vectors")
REWRITE_LOCK_TIMEOUT = "5s"  # VACUUM FULL waits at most this long for readers of the index to finish


def vacuum(db: PsycopgConnection, *, delay_s: float) -> bool | None:
    """True when no erased row version is left in the tables' live files, False when an older snapshot
    still sees some, None when the oldest erasure request is younger than `delay_s` (nothing ran)."""
    requested = db.execute(
        "SELECT max(seq), COALESCE(EXTRACT(EPOCH FROM clock_timestamp() - min(requested_at)), 0)::float8"
        " FROM erasure_requests"
    ).fetchone()
    if requested is not None and requested[0] is not None and float(requested[1]) < delay_s:
        return None
    db.execute(f"VACUUM {', '.join(ERASED_TABLES)}")
    left = db.execute(
        "SELECT COALESCE(sum(pg_stat_get_dead_tuples(c.oid)), 0) FROM pg_class AS c"
        " WHERE c.oid = ANY (?::regclass[]) OR c.oid IN"
        " (SELECT reltoastrelid FROM pg_class WHERE oid = ANY (?::regclass[]))",
        (list(ERASED_TABLES), list(ERASED_TABLES)),
    ).fetchone()
    if left is None or int(left[0]) > 0:
        return False  # an older snapshot still sees them: the rewrite would copy them along
    if requested is not None and requested[0] is not None:
        # A session setting, on a connection of its own (never a pooled one): only the rewrite may give up.
        db.execute("SELECT set_config('lock_timeout', ?, false)", (REWRITE_LOCK_TIMEOUT,))
        try:
            db.execute(f"VACUUM FULL {', '.join(REWRITTEN_TABLES)}")
        finally:
            db.execute("RESET lock_timeout")
        db.execute("DELETE FROM erasure_requests WHERE seq <= ?", (requested[0],))
    return True


def erasure_requested(connection: Connection) -> bool:
    row = connection.execute("SELECT EXISTS (SELECT 1 FROM erasure_requests)").fetchone()
    return bool(row and row[0])


def may_vacuum(connection: Connection) -> bool:
    """PostgreSQL 15 lets only superusers and the owners of a table or of the database VACUUM it."""
    row = connection.execute(
        "SELECT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)"
        " OR pg_has_role(current_user, (SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')"
        " OR (SELECT bool_and(pg_has_role(current_user, relowner, 'USAGE')) FROM pg_class"
        "     WHERE oid = ANY (%s::regclass[]))",
        (list(ERASED_TABLES),),
    ).fetchone()
    return bool(row and row[0])
