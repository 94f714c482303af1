"""`serve --http` against slow and flooding clients (issue 14): a real server, real sockets.

Half-open connections that never finish their headers, or dribble them a byte at a time, or send
headers and then never their body, are closed; a flood of them never keeps a genuine request from its
answer, never takes more descriptors than the cap, and writes a bounded number of log lines.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_memory.host.serve.http_guard import _no_delay
from tests.support.homes import bind, make_home
from tests.support.http_agents import HttpAgent, HttpServer

CAP = 40
FLOOD = 4 * CAP


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[HttpServer, str]]:
    paths = make_home(tmp_path / "home")
    token = bind(paths).token
    args = ("--header-timeout", "1", "--body-timeout", "1", "--max-connections", str(CAP))
    with HttpServer(paths.home, tmp_path / "serve.log", *args) as server:
        yield server, token


def _open(server: HttpServer, first: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    if first:
        sock.sendall(first)
    return sock


def _closed_by_server(sock: socket.socket, within_s: float = 15.0) -> bool:
    """Whether the server closed this socket (EOF or reset) before the deadline."""
    sock.settimeout(within_s)
    try:
        while sock.recv(65_536):
            pass
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return True


def _descriptors(pid: int) -> int:
    return sum(1 for _ in Path(f"/proc/{pid}/fd").iterdir())


def _genuine_search(server: HttpServer, token: str) -> None:
    with HttpAgent(server.url, token) as agent:
        assert (
            agent.value("engram_memory_search", {"query": "runbook", "purpose_ref": "purpose:tests"})["records"] == []
        )


def test_a_connection_that_never_sends_its_headers_is_closed(guarded: tuple[HttpServer, str]) -> None:
    server, _token = guarded
    with _open(server) as silent, _open(server, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n") as partial:
        assert _closed_by_server(silent) and _closed_by_server(partial)


def test_headers_dribbled_a_byte_at_a_time_are_cut_off(guarded: tuple[HttpServer, str]) -> None:
    server, _token = guarded
    request = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 200
    started = time.monotonic()
    with _open(server) as sock:
        try:
            for byte in request:
                sock.sendall(bytes([byte]))
                time.sleep(0.05)  # every byte well inside any idle timeout; the whole far past the header one
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert _closed_by_server(sock)
    assert time.monotonic() - started < len(request) * 0.05  # cut before the dribble could finish


def test_a_body_that_never_comes_is_cut_off(guarded: tuple[HttpServer, str]) -> None:
    server, token = guarded
    head = (
        b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
        b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        b"Content-Length: 100000\r\n\r\n{" % (server.port, token.encode())
    )
    with _open(server, head) as sock:
        assert _closed_by_server(sock)


def test_a_flood_of_half_open_connections_never_keeps_a_genuine_request_waiting(
    guarded: tuple[HttpServer, str],
) -> None:
    server, token = guarded
    baseline = _descriptors(server.process.pid)
    flood = [_open(server, b"GET /mcp HTTP/1.1\r\n") for _ in range(FLOOD)]
    try:
        for _ in range(3):
            _genuine_search(server, token)  # answered while the flood holds every slot it can
        held = _descriptors(server.process.pid) - baseline
        assert held <= CAP + 4, held  # the cap, and the listener's and the client's transient ones
        for sock in flood:
            assert _closed_by_server(sock)
    finally:
        for sock in flood:
            sock.close()
    _genuine_search(server, token)
    # Thousands of events, a bounded log: the budget's lines plus the server's own start and stop.
    assert len(server.stderr().splitlines()) < 60, server.stderr()


class _Transport:
    """Only the socket a real transport would hand over (get_extra_info); the rest is unused here."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_extra_info(self, name: str) -> object:
        return self.sock if name == "socket" else None


def test_accepted_connections_send_without_nagles_delay() -> None:
    # Headers and body are separate writes: with Nagle's algorithm each waited ~40 ms for an ACK.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        with client, accepted:
            accepted.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
            _no_delay(_Transport(accepted))  # type: ignore[arg-type]
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
