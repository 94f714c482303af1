"""Raw JSON-RPC messages for tests that speak to `serve` line by line, below any SDK client."""

from __future__ import annotations

from typing import Any

INITIALIZED: dict[str, Any] = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def initialize(request_id: int, client: str = "raw") -> dict[str, Any]:
    """The legacy-era handshake request a raw client opens with."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": client, "version": "1"}},
    }
