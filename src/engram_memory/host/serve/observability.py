"""What a server behind a load balancer shows its operators: health routes, Prometheus metrics, an access log.

`/healthz` answers while the process runs; `/readyz` only while the store and the key vault answer
(503 otherwise), so a balancer stops sending calls to a process that cannot serve them. Metrics are
served on a port of their own, on loopback only (a scraper runs beside the process or tunnels in):
calls per tool and outcome, their latency, HTTP answers per status class, and the vector queue. The access log is one
line per HTTP request: client address, method, path, status and milliseconds; never a header, a query
or a body, so no token and no memory text. It is off unless asked for (`--access-log`): a flood of
requests would otherwise be a flood of lines.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import anyio
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engram_memory.engine.engine import AnswersCalls, Engine

__all__ = ["AccessLog", "Metrics", "health_routes"]

access_logger = logging.getLogger("engram_memory.access")
# Seconds: a search answers in milliseconds, an import batch or a cold model in seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    """The process's metrics, in a registry of its own (nothing of the library's defaults leaks in twice)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._calls = Counter(
            "engram_memory_tool_calls",
            "Tool calls answered, by tool and outcome (ok, an error code, or protocol_error).",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self._latency = Histogram(
            "engram_memory_tool_call_duration_seconds",
            "Seconds from a tool call's arrival to its answer, by tool.",
            ["tool"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._store_errors = Counter(
            "engram_memory_store_errors",
            "Tool calls answered STORE_UNAVAILABLE or MUTATION_OUTCOME_UNKNOWN, by code.",
            ["code"],
            registry=self.registry,
        )
        self._http = Counter(
            "engram_memory_http_responses",
            "HTTP responses, by status class (2xx, 4xx, 5xx...).",
            ["status_class"],
            registry=self.registry,
        )

    def watch_queue(self, engine: AnswersCalls) -> None:
        """Reports the engine's vector queue at every scrape (the indexer embeds beside the admissions)."""
        gauge = Gauge(
            "engram_memory_vector_queue_depth",
            "Admitted records of this process waiting for their vector.",
            registry=self.registry,
        )
        gauge.set_function(lambda: float(engine.vector_queue_depth()))

    def observe_call(self, tool: str, outcome: str, seconds: float) -> None:
        # A tool name is the caller's text: names the server does not serve share one label value.
        label = tool if tool.startswith("engram_memory_") and len(tool) <= 64 else "unknown"
        self._calls.labels(label, outcome).inc()
        self._latency.labels(label).observe(seconds)
        if outcome in ("STORE_UNAVAILABLE", "MUTATION_OUTCOME_UNKNOWN"):
            self._store_errors.labels(outcome).inc()

    def observe_status(self, status: int) -> None:
        self._http.labels(f"{status // 100}xx").inc()

    def serve(self, port: int) -> int:
        """Serves /metrics on 127.0.0.1:port (0 picks one) from a daemon thread; the port it listens on."""
        server, _thread = start_http_server(port, addr="127.0.0.1", registry=self.registry)
        return int(server.server_port)


def health_routes(owner: Engine) -> list[BaseRoute]:
    async def healthz(_request: Request) -> Response:
        return JSONResponse({"status": "alive"}, headers={"cache-control": "no-store"})

    async def readyz(_request: Request) -> Response:
        ready = await anyio.to_thread.run_sync(owner.ready)
        body = {"status": "ready" if ready else "unavailable"}
        return JSONResponse(body, status_code=200 if ready else 503, headers={"cache-control": "no-store"})

    return [Route("/healthz", healthz, methods=["GET"]), Route("/readyz", readyz, methods=["GET"])]


class AccessLog:
    """ASGI middleware: counts every response's status, and logs one line per request when `log` is on."""

    def __init__(self, app: ASGIApp, metrics: Metrics | None, *, log: bool) -> None:
        self._app = app
        self._metrics = metrics
        self._log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self._app(scope, receive, sending)
        finally:
            if self._metrics is not None:
                self._metrics.observe_status(status["code"])
            if self._log:
                access_logger.info(
                    "%s %s %s %d %.1fms",
                    _client(scope),
                    scope.get("method", "-"),
                    _path(scope),
                    status["code"],
                    (time.perf_counter() - started) * 1000,
                )


def _client(scope: Scope) -> str:
    client: Any = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else "-"


def _path(scope: Scope) -> str:
    """The path only (no query), its control characters escaped: a log line stays one line."""
    path = str(scope.get("path", "-"))[:256]
    return path.encode("unicode_escape").decode("ascii")
