"""Statements for the human confirmation requests behind the gate, mixed into the one transaction class
(see transaction.py): an agent's call finds and files them in its own scope, the host's queue spans scopes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engram_memory.engine.ports.rows import ConfirmationRow, Scope
from engram_memory.stores.sql.base import SqlBase
from engram_memory.stores.sql.rows import CONFIRMATION_COLUMNS, compact_json, confirmation_row


class ConfirmationQueries(SqlBase):
    """Each statement names its scope, except the host's, which say why they span scopes."""

    def find_confirmations(
        self, scope: Scope, principal: str, tool: str, target: str, operation_digest: str
    ) -> list[ConfirmationRow]:
        self._enter_tenant(scope.tenant)
        rows = self._db.execute(
            f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations"  # noqa: S608
            " WHERE tenant = ? AND workspace = ? AND principal = ? AND tool = ? AND target = ?"
            " AND operation_digest = ? ORDER BY requested_at_ms, confirmation_id",
            (scope.tenant, scope.workspace, principal, tool, target, operation_digest),
        ).fetchall()
        return [confirmation_row(row) for row in rows]

    def insert_confirmation(self, row: ConfirmationRow) -> None:
        self._enter_tenant(row.scope.tenant)
        self._db.execute(
            f"INSERT INTO confirmations ({CONFIRMATION_COLUMNS})"  # noqa: S608
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            self._confirmation_values(row),
        )

    def save_confirmation(self, row: ConfirmationRow) -> None:
        self._enter_tenant(row.scope.tenant)
        self._db.execute(
            "UPDATE confirmations SET status = ?, decided_at_ms = ?, decided_by = ?, approval_expires_at_ms = ?,"
            " consumed_at_ms = ? WHERE confirmation_id = ?",
            (
                row.status,
                row.decided_at_ms,
                row.decided_by,
                row.approval_expires_at_ms,
                row.consumed_at_ms,
                row.confirmation_id,
            ),
        )

    @staticmethod
    def _confirmation_values(row: ConfirmationRow) -> tuple[Any, ...]:
        return (
            row.confirmation_id,
            row.scope.tenant,
            row.scope.workspace,
            row.actor.principal,
            row.actor.agent_id,
            row.actor.session,
            row.tool,
            row.target,
            row.operation_digest,
            row.reason_ref,
            compact_json(dict(row.summary)),
            row.status,
            row.requested_at_ms,
            row.decided_at_ms,
            row.decided_by,
            row.approval_expires_at_ms,
            row.consumed_at_ms,
        )

    def get_confirmation(self, confirmation_id: str) -> ConfirmationRow | None:
        # Host path: the human names a request from the cross-scope queue by its id alone.
        row = self._db.execute(
            f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations WHERE confirmation_id = ?",  # noqa: S608
            (confirmation_id,),
        ).fetchone()
        return None if row is None else confirmation_row(row)

    def list_confirmations(self, statuses: Sequence[str] | None) -> list[ConfirmationRow]:
        # Host path: the confirmation queue spans scopes on purpose (one human answers for the host).
        query = f"SELECT {CONFIRMATION_COLUMNS} FROM confirmations"  # noqa: S608
        params: tuple[str, ...] = ()
        if statuses is not None:
            query += " WHERE status IN (" + ", ".join("?" for _ in statuses) + ")"
            params = tuple(statuses)
        rows = self._db.execute(query + " ORDER BY requested_at_ms, confirmation_id", params).fetchall()
        return [confirmation_row(row) for row in rows]
