"""What verification, statistics, the audit export and revocation need of a transaction."""

from __future__ import annotations

from typing import Protocol


class OperationsTx(Protocol):
    """Host-path methods; agent calls never use them."""
