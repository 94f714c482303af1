"""`serve --http`: the MCP server over streamable HTTP, run by uvicorn with the host's housekeeping beside it.

Each request's bearer token is verified against this home's signing key; the process keeps no session,
so any number of them can serve one store behind a load balancer.
"""

from __future__ import annotations

import errno
import functools
import logging
import math
import signal
import socket
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import anyio
import uvicorn
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from starlette.requests import ClientDisconnect
from starlette.routing import BaseRoute

from engram_memory.contract.binding import Binding
from engram_memory.engine.engine import AnswersCalls, Engine
from engram_memory.host.bindings import BindingError, verify_binding
from engram_memory.host.language.catalogue import _
from engram_memory.host.serve.http_guard import ConnectionGuard, GuardSettings, descriptor_budget, guarded_protocol
from engram_memory.host.serve.observability import AccessLog, Metrics, health_routes
from engram_memory.host.serve.stdio import housekeeping_loop
from engram_memory.mcp.addresses import is_loopback
from engram_memory.mcp.http import (
    MCP_PATH,
    Authorization,
    TokenCheck,
    build_http_app,
    request_binding,
)
from engram_memory.mcp.log_budget import BudgetFilter, OneLineFor
from engram_memory.mcp.server import build_server

logger = logging.getLogger(__name__)

GRACEFUL_SHUTDOWN_S = 5
_CLIENT_CAUSED = BudgetFilter()
# The SDK logs "Error handling POST request" with a traceback whenever a client hangs up mid-body.
_HUNG_UP = OneLineFor((ClientDisconnect,), "a client hung up before its request arrived whole")
DEFAULT_GUARD = GuardSettings()


class ListenError(Exception):
    """The address cannot (or must not) be listened on; the message is a one-line reason."""


def refuse_unsafe_address(host: str, allow_remote: bool) -> None:
    """Bearer tokens travel in every request: over plain HTTP they must not leave the machine unasked."""
    if not is_loopback(host) and not allow_remote:
        raise ListenError(
            _(
                "refusing to listen on {host}: bearer tokens would cross the network in plain HTTP; terminate TLS in "
                "front of this server and pass --allow-remote"
            ).format(host=host)
        )


def listen(host: str, port: int) -> socket.socket:
    """A bound listening socket (port 0 picks a free one), so the real port is known before serving."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family, backlog=2048)
    except (OSError, OverflowError) as exc:
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            raise ListenError(
                _(
                    "cannot listen on {host}:{port}: another program already uses that port (perhaps another "
                    "engram-memory serve or console); choose a free one with --port, or --port 0 for any"
                ).format(host=host, port=port)
            ) from exc
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ListenError(
            _("cannot listen on {host}:{port}: {reason}").format(host=host, port=port, reason=reason)
        ) from exc


# Bearer tokens whose verdict a server keeps: an agent sends the same token with every call.
VERIFIED_TOKENS = 4096


def token_check(public_key: Ed25519PublicKey) -> TokenCheck:
    """A bearer token's binding when this host signed it (expired or not), else None.

    The verdict is kept for the last VERIFIED_TOKENS tokens seen: a signature check and the token's
    parsing cost about a tenth of a write call's CPU, and their result depends on nothing but the token
    and the key. What can change — expiry, revocation — the engine judges on every call."""

    @functools.lru_cache(maxsize=VERIFIED_TOKENS)
    def check(token: str) -> Binding | None:
        try:
            return verify_binding(public_key, token)
        except BindingError:
            return None

    return check


def endpoint_url(host: str, port: int, *, https: bool = False) -> str:
    literal = host.strip("[]")
    return f"http{'s' if https else ''}://{f'[{literal}]' if ':' in literal else literal}:{port}{MCP_PATH}"


@dataclass(frozen=True, slots=True)
class SignIn:
    """The authorization server's routes and what the MCP endpoint says of it."""

    routes: Sequence[BaseRoute]
    authorization: Authorization


@dataclass(frozen=True, slots=True)
class Tls:
    certificate: Path
    key: Path


class SignalQuietServer(uvicorn.Server):
    """uvicorn, except that a stop signal ends `serve()` normally instead of being raised again afterwards.

    uvicorn re-raises the signal it caught once it has shut down, which kills the process before the
    store and the key vault are closed; here the command returns and closes them.
    """

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


async def _serve(server: uvicorn.Server, sock: socket.socket, owners: Sequence[Engine], interval_s: float) -> None:
    async with anyio.create_task_group() as group:
        group.start_soon(housekeeping_loop, owners, interval_s)
        await server.serve(sockets=[sock])
        group.cancel_scope.cancel()


def serve_http(
    agents: AnswersCalls,
    owner: Engine,
    public_key: Ed25519PublicKey,
    *,
    host: str,
    port: int,
    housekeeping_every_s: float,
    settings: GuardSettings = DEFAULT_GUARD,
    metrics_port: int | None = None,
    access_log: bool = False,
    sign_in: SignIn | None = None,
    tls: Tls | None = None,
    owners: Sequence[Engine] = (),
) -> None:
    """Serves until SIGINT or SIGTERM. Raises ListenError when the address cannot be bound.

    `agents` answers the calls (the runtime role on PostgreSQL); `owner` runs the readiness probe, and
    the housekeeping with `owners` (every cluster's, when the home's tenants live in several).
    `metrics_port`: serve Prometheus metrics on 127.0.0.1 there (0 picks a port).
    `sign_in`: this host is also the authorization server of its endpoint (people sign in; their clients'
    tokens are bindings the access rules decide). `tls`: serve HTTPS with this certificate and key.
    """
    logging.getLogger("mcp").setLevel(logging.WARNING)  # the SDK logs every stateless request at INFO
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per client metadata document fetched
    for name in ("uvicorn.error", "asyncio"):  # lines a client causes: a bad request, an accept error
        logging.getLogger(name).addFilter(_CLIENT_CAUSED)
    logging.getLogger("mcp.server.streamable_http").addFilter(_HUNG_UP)
    sock = listen(host, port)
    try:
        bound_port = int(sock.getsockname()[1])
        metrics = Metrics()
        metrics.watch_queue(agents)
        server = build_server(agents, request_binding, observe=metrics.observe_call)
        routes = [*health_routes(owner), *(sign_in.routes if sign_in is not None else ())]
        app = build_http_app(
            server,
            token_check(public_key),
            host=host,
            port=bound_port,
            extra_routes=routes,
            authorization=None if sign_in is None else sign_in.authorization,
        )
        if metrics_port is not None:
            try:
                served_on = metrics.serve(metrics_port)
            except OSError as exc:
                raise ListenError(
                    _("cannot serve metrics on 127.0.0.1:{metrics_port}: {reason}").format(
                        metrics_port=metrics_port, reason=exc.strerror or exc
                    )
                ) from exc
            logger.info("serving Prometheus metrics at http://127.0.0.1:%d/metrics", served_on)
        guard = ConnectionGuard(replace(settings, max_connections=descriptor_budget(settings.max_connections)))
        config = uvicorn.Config(
            AccessLog(app, metrics, log=access_log),
            http=guarded_protocol(guard),
            lifespan="on",
            log_config=None,
            log_level=logging.WARNING,
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
            # An idle keep-alive connection is closed by the header deadline (http_guard.py), later than
            # HTTP clients let theirs expire (httpx: 5 s). uvicorn's own 5 s would race them: a client
            # reusing a connection as the server closes it gets a reset instead of an answer.
            timeout_keep_alive=max(1, math.ceil(guard.settings.header_timeout_s)),
            ssl_certfile=None if tls is None else str(tls.certificate),
            ssl_keyfile=None if tls is None else str(tls.key),
        )
        if not is_loopback(host) and tls is None:
            logger.warning("listening beyond this machine: only behind a TLS-terminating proxy")
        logger.info("serving MCP over streamable HTTP at %s", endpoint_url(host, bound_port, https=tls is not None))
        if sign_in is not None:
            logger.info("people sign in at %s for %s", sign_in.authorization.issuer, sign_in.authorization.resource)
        anyio.run(_serve, SignalQuietServer(config), sock, owners or [owner], housekeeping_every_s)
    except KeyboardInterrupt:  # Ctrl-C before uvicorn took over the signals
        logger.info("stopped")
    finally:
        sock.close()
