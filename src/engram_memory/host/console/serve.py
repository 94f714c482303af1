"""`engram-memory console`: the console on loopback, its one-time login link printed for the person who started it.

Loopback only, with no option to listen elsewhere: the console shows decrypted memories and
destroys them on a click, so it is for the host's own machine (an SSH tunnel reaches it from afar).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import replace

import uvicorn

from engram_memory.host.compose import current_user, open_engine
from engram_memory.host.console.app import build_console
from engram_memory.host.console.context import Console
from engram_memory.host.console.session import ConsoleSessions
from engram_memory.host.serve.http import DEFAULT_GUARD, SignalQuietServer, listen
from engram_memory.host.serve.http_guard import ConnectionGuard, descriptor_budget, guarded_protocol
from engram_memory.host.settings import HostPaths

CONSOLE_HOST = "127.0.0.1"


def login_url(port: int, token: str) -> str:
    return f"http://{CONSOLE_HOST}:{port}/login?token={token}"


def serve_console(paths: HostPaths, *, port: int, announce: Callable[[str], None]) -> None:
    """Serves until SIGINT or SIGTERM. Raises ListenError when the port cannot be bound; HomeError,
    KeyFileError and ContractError when the home's store cannot be opened (before anything is printed)."""
    with open_engine(paths) as engine:
        sock = listen(CONSOLE_HOST, port)
        try:
            sessions = ConsoleSessions()
            app = build_console(Console(engine, paths, current_user()), sessions)
            guard = ConnectionGuard(replace(DEFAULT_GUARD, max_connections=descriptor_budget(64)))
            config = uvicorn.Config(
                app,
                http=guarded_protocol(guard),
                lifespan="off",
                log_config=None,
                log_level=logging.WARNING,
                access_log=False,
                server_header=False,
                timeout_graceful_shutdown=2,
                timeout_keep_alive=max(1, math.ceil(guard.settings.header_timeout_s)),
            )
            bound = int(sock.getsockname()[1])
            announce(login_url(bound, sessions.login_token))
            SignalQuietServer(config).run(sockets=[sock])
        finally:
            sock.close()
