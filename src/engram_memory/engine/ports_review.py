"""What the host's review queue needs of a transaction (issue 3: review list/show/accept/reject)."""

from __future__ import annotations

from typing import Protocol


class ReviewTx(Protocol):
    """Host-path methods; agent calls never use them."""
