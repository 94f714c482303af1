"""What the host's lifecycle maintenance needs of a transaction (records dispute ... tombstone, expiry)."""

from __future__ import annotations

from typing import Protocol


class MaintenanceTx(Protocol):
    """Host-path methods; agent calls never use them."""
