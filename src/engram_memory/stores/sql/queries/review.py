"""Statements for the host's review path, mixed into the one transaction class (see transaction.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engram_memory.contract.tools import Tool
from engram_memory.engine.ports.rows import CandidateRow, IdempotencyRow, Scope
from engram_memory.stores.sql.base import SqlBase, StoreInvariantError
from engram_memory.stores.sql.rows import CANDIDATE_COLUMNS, candidate_row, compact_json

_PENDING = "pending"
_PENDING_ADJUDICATION = "pending_adjudication"


class ReviewQueries(SqlBase):
    """Host-path statements; each names its scope, or says why it spans scopes."""

    def list_review_queue(self, *, include_unsent: bool, limit: int) -> list[CandidateRow]:
        # Spans scopes on purpose: one human reviews for the whole host, whatever tenant captured it.
        # Only ids, counts and reason codes are read here; no body leaves the store.
        adjudication = "" if include_unsent else " AND adjudication = 1"
        rows = self._db.execute(
            f"SELECT {CANDIDATE_COLUMNS} FROM candidates"  # noqa: S608
            f" WHERE state = ?{adjudication} ORDER BY captured_at_ms, candidate_id LIMIT ?",
            (_PENDING, limit),
        ).fetchall()
        return [candidate_row(row) for row in rows]

    def find_candidate(self, candidate_id: str) -> CandidateRow | None:
        # Spans scopes on purpose: the host names a candidate from the cross-scope queue by its id
        # alone (ids are globally unique); the row it returns carries its scope for every later step.
        row = self._db.execute(
            f"SELECT {CANDIDATE_COLUMNS} FROM candidates WHERE candidate_id = ?",  # noqa: S608
            (candidate_id,),
        ).fetchone()
        return None if row is None else candidate_row(row)

    def pending_admission_answers(self, scope: Scope, candidate_id: str) -> list[IdempotencyRow]:
        self._enter_tenant(scope.tenant)
        status = self._json_text("response", "outcome", "status")
        rows = self._db.execute(
            "SELECT principal, idem_key, tool, operation_digest, target, response, created_at_ms FROM idempotency"  # noqa: S608
            f" WHERE tenant = ? AND workspace = ? AND tool = ? AND target = ? AND {status} = ?"
            " ORDER BY created_at_ms, principal, idem_key",
            (scope.tenant, scope.workspace, Tool.REQUEST_ADMISSION.value, candidate_id, _PENDING_ADJUDICATION),
        ).fetchall()
        return [
            IdempotencyRow(
                scope=scope,
                principal=row[0],
                key=row[1],
                tool=row[2],
                operation_digest=row[3],
                target=row[4],
                response=json.loads(row[5]),
                created_at_ms=row[6],
            )
            for row in rows
        ]

    def rewrite_admission_answer(self, scope: Scope, principal: str, key: str, response: Mapping[str, Any]) -> None:
        self._enter_tenant(scope.tenant)
        cursor = self._db.execute(
            "UPDATE idempotency SET response = ? WHERE tenant = ? AND workspace = ? AND principal = ? AND idem_key = ?"
            " AND tool = ?",
            (
                compact_json(dict(response)),
                scope.tenant,
                scope.workspace,
                principal,
                key,
                Tool.REQUEST_ADMISSION.value,
            ),
        )
        if cursor.rowcount != 1:
            raise StoreInvariantError("rewriting an admission answer that does not exist")
