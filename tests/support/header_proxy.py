"""A loopback reverse proxy that adds headers to every request: for MCP tools that cannot send one (the
official conformance suite connects without an Authorization header, and the server requires a binding)."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType

import httpx2
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"}


class HeaderProxy:
    """Forwards `http://127.0.0.1:PORT/<path>` to the target's origin, adding `headers`; buffers answers
    (the server answers JSON, not streams)."""

    def __init__(self, target_url: str, headers: dict[str, str]) -> None:
        self._origin = target_url.split("/mcp", 1)[0]
        self._path = "/mcp"
        self._headers = headers
        self._client: httpx2.AsyncClient | None = None
        app = Starlette(
            routes=[Route("/{path:path}", self._forward, methods=["GET", "POST", "DELETE", "OPTIONS"])],
            lifespan=self._lifespan,
        )
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="error", lifespan="on", timeout_graceful_shutdown=1
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self.url = ""

    @asynccontextmanager
    async def _lifespan(self, _app: Starlette) -> AsyncIterator[None]:
        async with httpx2.AsyncClient(timeout=60) as client:
            self._client = client
            yield
        self._client = None

    async def _forward(self, request: Request) -> Response:
        """The request as if sent to the target: a Host or Origin naming this proxy names the target
        instead, and any other (a DNS-rebinding probe's) passes unchanged, so the target judges it."""
        own_port, target_port = str(request.url.port), self._origin.rsplit(":", 1)[1]
        sent = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP - {"host"}}
        for name in ("host", "origin"):
            named, _, port = sent.get(name, "").rpartition(":")
            if named and port == own_port:
                sent[name] = f"{named}:{target_port}"
        sent.update(self._headers)
        assert self._client is not None
        answer = await self._client.request(
            request.method, self._origin + request.url.path, headers=sent, content=await request.body()
        )
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP_BY_HOP | {"content-encoding"}}
        return Response(answer.content, status_code=answer.status_code, headers=kept)

    def __enter__(self) -> HeaderProxy:
        self._thread.start()
        while not self._server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the header proxy did not start")
            threading.Event().wait(0.01)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}{self._path}"
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _value: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=30)
