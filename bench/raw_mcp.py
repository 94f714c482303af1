"""A lean MCP client for load: tool calls over streamable HTTP on one keep-alive connection, nothing else.

It sends what the SDK's client sends for a stateless tools/call (the same headers, the same JSON-RPC
body with its `_meta`, the same protocol revision) and reads the JSON response, but skips the SDK's
layers (httpx, pydantic models, output-schema validation), which cost about 1.2 ms of CPU a call on
this machine. A benchmark that shares two cores between its clients and the servers it measures uses
it for the aggregate write load, so that the servers' throughput is what is measured; search latency is
still measured through the SDK's client (bench/scale_server.py).
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any
from urllib.parse import urlsplit

PROTOCOL_VERSION = "2026-07-28"  # what the SDK's client sends (mcp 2.x)
_META = {
    "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "engram-bench", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


class RawToolClient:
    """One agent's connection; calls go one at a time, as an agent waiting for each answer sends them."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self._host, self._port, self._path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/"
        self._authority = f"{self._host}:{self._port}"
        self._token = token
        self._ids = itertools.count(1)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """The tool's structured content (the contract's envelope). Raises RuntimeError on anything else."""
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": next(self._ids),
                "method": "tools/call",
                "params": {"name": name, "arguments": arguments, "_meta": _META},
            },
            separators=(",", ":"),
        ).encode("utf-8")
        head = (
            f"POST {self._path} HTTP/1.1\r\nHost: {self._authority}\r\nAuthorization: Bearer {self._token}\r\n"
            "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"
            f"MCP-Protocol-Version: {PROTOCOL_VERSION}\r\nMcp-Method: tools/call\r\nMcp-Name: {name}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode("ascii")
        status, payload = await self._exchange(head + body)
        if status != 200:
            raise RuntimeError(f"{name}: HTTP {status}")
        answer = json.loads(payload)
        result = answer.get("result") if isinstance(answer, dict) else None
        envelope = result.get("structuredContent") if isinstance(result, dict) else None
        if not isinstance(envelope, dict):
            raise RuntimeError(f"{name}: no envelope in {payload[:200]!r}")
        return envelope

    async def _exchange(self, request: bytes) -> tuple[int, bytes]:
        if self._writer is None or self._writer.is_closing():
            self._reader, self._writer = await asyncio.open_connection(self._host, self._port)
        assert self._reader is not None
        self._writer.write(request)
        await self._writer.drain()
        head = await self._reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length, closing = 0, False
        for line in lines[1:]:
            field, _, value = line.partition(":")
            field = field.strip().lower()
            if field == "content-length":
                length = int(value.strip())
            elif field == "connection" and value.strip().lower() == "close":
                closing = True
        payload = await self._reader.readexactly(length)
        if closing:
            await self.close()
        return status, payload
