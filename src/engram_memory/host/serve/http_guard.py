"""`serve --http` against slow and flooding clients: every connection must earn its descriptor.

uvicorn times out a connection only between requests. A client that opens a socket and sends its
headers a byte at a time (slowloris), or never, holds a descriptor for as long as it likes; a few
hundred of them used up the process's descriptors, genuine requests went unanswered and the accept
loop logged a traceback per attempt. Here, on top of uvicorn's h11 protocol:

* a connection must complete a request's headers within `header_timeout_s` of opening (or of its
  previous response), and the request's body within `body_timeout_s` of its headers; the time the
  server then takes to answer is never limited;
* at most `max_connections` are open (kept below the descriptor limit). When a new one would pass
  that, the oldest connection still waiting for its headers is closed to make room: a genuine client
  sends its request at once, so it always gets in, while a flood only displaces itself. When every
  connection is busy with a request, the newcomer is closed instead;
* what the clients cause is logged within a budget (mcp/log_budget.py), never a line per socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
import socket
from dataclasses import dataclass
from typing import Any

from engram_memory.mcp.log_budget import LogBudget

__all__ = ["ConnectionGuard", "GuardSettings", "descriptor_budget", "guarded_protocol"]

logger = logging.getLogger(__name__)

HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
MAX_CONNECTIONS = 1024
# Descriptors kept for everything but client sockets: the store, the vault, logs, the model, the listener.
RESERVED_DESCRIPTORS = 128


@dataclass(frozen=True, slots=True)
class GuardSettings:
    header_timeout_s: float = HEADER_TIMEOUT_S
    body_timeout_s: float = BODY_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS


def descriptor_budget(wanted: int = MAX_CONNECTIONS) -> int:
    """How many client connections this process can hold: the soft descriptor limit is raised as far as
    the hard one allows (up to what `wanted` needs), and the reserve is kept back."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + RESERVED_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - RESERVED_DESCRIPTORS))


class ConnectionGuard:
    """The connections of one server: which are open, and which still wait for a request's headers
    (oldest first)."""

    def __init__(self, settings: GuardSettings) -> None:
        self.settings = settings
        self.open: set[Any] = set()
        self.waiting: dict[Any, None] = {}
        self.closed_slow = 0
        self.evicted = 0
        self.refused = 0
        self._log = LogBudget(logger)

    def admit(self, connection: Any) -> bool:
        """Whether `connection` may stay open; may close the oldest waiting one to make room."""
        self.open.add(connection)
        if len(self.open) <= self.settings.max_connections:
            return True
        victim = next(iter(self.waiting), None)
        if victim is None:
            self.open.discard(connection)
            self.refused += 1
            self._log.warning("refused a connection: all %d are busy with requests", self.settings.max_connections)
            return False
        self.forget(victim)
        self.evicted += 1
        self._log.warning("closed the oldest connection still without a request to make room for a new one")
        victim.transport.close()
        return True

    def forget(self, connection: Any) -> None:
        self.open.discard(connection)
        self.waiting.pop(connection, None)

    def slow(self, what: str) -> None:
        self.closed_slow += 1
        self._log.warning("closed a connection that did not send its %s in time", what)


def _no_delay(transport: asyncio.Transport) -> None:
    """Responses go out as several writes (headers, body): without TCP_NODELAY each waited for the
    client's delayed acknowledgement of the one before, about 40 ms a request."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def guarded_protocol(guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with `guard`'s limits (uvicorn.Config(http=...)). uvicorn is imported
    here, so that the commands that never serve HTTP do not load it."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    settings = guard.settings

    class GuardedH11Protocol(H11Protocol):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            _no_delay(transport)
            super().connection_made(transport)
            if not guard.admit(self):
                transport.close()
                return
            self._await_request()

        def _cancel_deadline(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _await_request(self) -> None:
            self._cancel_deadline()
            guard.waiting[self] = None
            self._deadline = self.loop.call_later(settings.header_timeout_s, self._headers_late)

        def _headers_late(self) -> None:
            self._deadline = None
            if self in guard.waiting and not self.transport.is_closing():
                guard.forget(self)
                guard.slow("request headers")
                self.transport.close()

        def _body_late(self) -> None:
            self._deadline = None
            if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
                guard.slow("request body")
                self.transport.abort()

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not None and self.cycle is not before:  # a request's headers are complete
                guard.waiting.pop(self, None)
                self._cancel_deadline()
                if self.conn.their_state is h11.SEND_BODY:
                    self._deadline = self.loop.call_later(settings.body_timeout_s, self._body_late)

        def on_response_complete(self) -> None:
            if not self.transport.is_closing():
                self._await_request()  # the next request's headers, as soon as this response is out
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            guard.forget(self)
            self._cancel_deadline()
            super().connection_lost(exc)

    return GuardedH11Protocol
