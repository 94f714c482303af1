"""The issued_bindings rows of both vaults, to and from their columns (grants kept as a sorted JSON array)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from engram_memory.engine.ports.store import IssuedBindingRow, RevocationRow

# Both drivers take `?` here (the PostgreSQL adapter turns it into its own placeholder).
INSERT_ISSUED = (
    "INSERT INTO issued_bindings (token_id, tenant, workspace, principal, agent_id, session, purpose_ref,"
    " grants, confirm_mutations, trust_class, issued_at_ms, expires_at_ms, issued_by)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
WAS_ISSUED = "SELECT 1 FROM issued_bindings WHERE token_id = ?"
ISSUED_NEWEST_FIRST = (
    "SELECT b.token_id, b.tenant, b.workspace, b.principal, b.agent_id, b.session, b.purpose_ref, b.grants,"
    " b.confirm_mutations, b.trust_class, b.issued_at_ms, b.expires_at_ms, b.issued_by,"
    " r.revoked_at_ms, r.revoked_by"
    " FROM issued_bindings AS b LEFT JOIN revocations AS r ON r.token_id = b.token_id"
    " ORDER BY b.issued_at_ms DESC, b.token_id LIMIT ?"
)
# The same, where the bindings one issuer (sign-in: one per refresh) made appear only as the newest of their
# session; parameters: that issuer, the limit.
ISSUED_NEWEST_FIRST_FOLDED = ISSUED_NEWEST_FIRST.replace(
    " ORDER BY",
    " WHERE b.issued_by <> ? OR NOT EXISTS (SELECT 1 FROM issued_bindings AS n"
    " WHERE n.session = b.session AND n.issued_by = b.issued_by"
    " AND (n.issued_at_ms > b.issued_at_ms OR (n.issued_at_ms = b.issued_at_ms AND n.token_id > b.token_id)))"
    " ORDER BY",
)


def issued_query(limit: int, latest_only_for: str | None) -> tuple[str, tuple[object, ...]]:
    if latest_only_for is None:
        return ISSUED_NEWEST_FIRST, (limit,)
    return ISSUED_NEWEST_FIRST_FOLDED, (latest_only_for, limit)


def issued_values(row: IssuedBindingRow) -> tuple[object, ...]:
    return (
        row.token_id,
        row.tenant,
        row.workspace,
        row.principal,
        row.agent_id,
        row.session,
        row.purpose_ref,
        json.dumps(sorted(row.grants)),
        bool(row.confirm_mutations),
        row.trust_class,
        row.issued_at_ms,
        row.expires_at_ms,
        row.issued_by,
    )


def issued_row(values: Sequence[object]) -> tuple[IssuedBindingRow, RevocationRow | None]:
    """A row of the binding's 13 columns, then its revocation's time and person (NULL when not revoked)."""
    grants = json.loads(str(values[7]))
    issued = IssuedBindingRow(
        token_id=str(values[0]),
        tenant=str(values[1]),
        workspace=str(values[2]),
        principal=str(values[3]),
        agent_id=str(values[4]),
        session=str(values[5]),
        purpose_ref=str(values[6]),
        grants=tuple(str(tool) for tool in grants),
        confirm_mutations=bool(values[8]),
        trust_class=str(values[9]),
        issued_at_ms=int(str(values[10])),
        expires_at_ms=int(str(values[11])),
        issued_by=str(values[12]),
    )
    revoked_at, revoked_by = values[13], values[14]
    revocation = None if revoked_at is None else RevocationRow(issued.token_id, int(str(revoked_at)), str(revoked_by))
    return issued, revocation
