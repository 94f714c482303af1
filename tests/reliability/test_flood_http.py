"""Connection floods against the real HTTP server (issue 14): held descriptors stay bounded, genuine agents
keep getting answers, the log stays small.

Four times the server's connection cap is opened at once, in four kinds: sockets that never send a
byte, headers left unfinished, headers dribbled a byte at a time, and complete headers whose body
never comes. While they are all held open (in the full run, past the header timeout), genuine agents,
a new SDK session each, capture and search; every call must be answered. The server's descriptors
never pass its cap by more than the few a listener and the genuine clients need, and it writes a
bounded number of log lines.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import threading
import time
from pathlib import Path

from tests.host.serve.test_http_guard import _descriptors
from tests.reliability.scale import amount, report
from tests.support.homes import bind, make_home
from tests.support.http_agents import HttpAgent, HttpServer
from tests.support.payloads import PURPOSE, capture_args

MARGIN = 8  # the listener, and the descriptors of the genuine clients being answered


def _room_for(wanted: int) -> int:
    """How many sockets this test process may open, raising its own soft limit as far as it can."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = wanted + 256 if hard == resource.RLIM_INFINITY else min(wanted + 256, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, target), hard))
        soft = max(soft, target)
    return min(wanted, soft - 256)


def _flood_socket(port: int, token: str, kind: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if kind == 1:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    elif kind == 2:
        sock.sendall(b"P")
    elif kind == 3:
        sock.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n"
            b"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            b"Content-Length: 100000\r\n\r\n{" % (port, token.encode())
        )
    return sock


def test_a_flood_of_slow_and_silent_connections_never_starves_genuine_agents(tmp_path: Path) -> None:
    paths = make_home(tmp_path / "home")
    token = bind(paths).token
    wanted = amount(50, 1024)  # full: the default cap
    flood_size = _room_for(4 * wanted)
    cap = min(wanted, flood_size // 4)  # a machine with fewer descriptors floods a smaller cap
    genuine = amount(4, 40)
    hold_s = amount(0, 15)  # full: held past the 10 s header timeout, which then closes the flood
    args = ("--max-connections", str(cap))  # the default header (10 s) and body (30 s) timeouts
    with HttpServer(paths.home, tmp_path / "serve.log", *args) as server:
        baseline = _descriptors(server.process.pid)
        flood = [_flood_socket(server.port, token, number % 4) for number in range(flood_size)]
        dribbling = [sock for number, sock in enumerate(flood) if number % 4 == 2]
        stop = threading.Event()

        def dribble() -> None:
            while not stop.wait(0.5):
                for sock in dribbling:
                    with contextlib.suppress(OSError):
                        sock.sendall(b"O")

        dribbler = threading.Thread(target=dribble, daemon=True)
        dribbler.start()
        answered, peak = 0, 0
        try:
            started = time.monotonic()
            number = 0
            while number < genuine or time.monotonic() - started < hold_s:
                number += 1
                with HttpAgent(server.url, token) as agent:
                    if number % 2:
                        agent.value("engram_memory_capture", capture_args(f"Written during the flood, note {number}."))
                    else:
                        agent.value("engram_memory_search", {"query": "flood", "purpose_ref": PURPOSE})
                    answered += 1
                peak = max(peak, _descriptors(server.process.pid) - baseline)
        finally:
            stop.set()
            dribbler.join(timeout=10)
            for sock in flood:
                sock.close()
        assert answered == number >= genuine
        assert peak <= cap + MARGIN, (peak, cap)
        with HttpAgent(server.url, token) as agent:  # and after it, as before
            assert agent.value("engram_memory_search", {"query": "flood", "purpose_ref": PURPOSE})["records"] == []
        assert server.process.poll() is None
        lines = len(server.stderr().splitlines())
        assert lines < 60, server.stderr()
    report("connections held open by a flood over HTTP", flood_size, target=f"4 x the server's cap of {cap}")
    report("genuine calls answered during the flood", answered, target=f"all of them (>= {genuine})")
    report("server descriptors above idle at the flood's peak", peak, target=f"<= cap + {MARGIN}")
    report("log lines the flood caused", lines, target="< 60")
