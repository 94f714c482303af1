"""What the host's review queue needs of a transaction (issue 3: review list/show/accept/reject)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from engram_memory.engine.ports.rows import CandidateRow, IdempotencyRow, Scope


class ReviewTx(Protocol):
    """Host-path methods; agent calls never use them."""

    def list_review_queue(self, *, include_unsent: bool, limit: int) -> list[CandidateRow]:
        """Pending candidates waiting for a human, oldest first, across every scope.

        With `include_unsent`, also the pending candidates no one has asked admission for yet.
        """
        ...

    def find_candidate(self, candidate_id: str) -> CandidateRow | None:
        """A candidate by id alone: the host names it from the queue, which spans scopes."""
        ...

    def pending_admission_answers(self, scope: Scope, candidate_id: str) -> list[IdempotencyRow]:
        """The recorded request_admission answers for this candidate that said pending_adjudication."""
        ...

    def rewrite_admission_answer(self, scope: Scope, principal: str, key: str, response: Mapping[str, Any]) -> None:
        """Replaces one recorded answer, so the agent's replay of that key returns the human's decision."""
        ...
