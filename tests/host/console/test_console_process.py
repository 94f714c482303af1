"""The real `engram-memory console` process without a browser: what it prints, what it logs, what it survives."""

from __future__ import annotations

import http.cookiejar
import re
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pytest

from engram_memory.host.settings import HostPaths
from tests.host.console.browser import console_process
from tests.support.homes import bind, engine_for
from tests.support.inprocess import InProcessAgent
from tests.support.processes import reap

pytestmark = pytest.mark.process
SECRET_TEXT = "The vault combination is kept in the blue binder."
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _opener() -> urllib.request.OpenerDirector:
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))


def test_a_session_shows_memory_text_but_the_process_logs_none_of_it_nor_the_token(sqlite_paths: HostPaths) -> None:
    with engine_for(sqlite_paths) as engine:
        InProcessAgent(engine, bind(sqlite_paths).binding).remember(SECRET_TEXT)
    logged: list[str] = []
    with console_process(sqlite_paths.home, logged) as link:
        base = link.split("/login")[0]
        browser = _opener()
        queue = browser.open(link, timeout=10).read().decode()
        token = _CSRF.search(queue)
        assert token is not None
        form = {"csrf": token.group(1), "tenant": "tenant-a", "workspace": "workspace-1", "query": "vault combination"}
        found = browser.open(base + "/records/search", urllib.parse.urlencode(form).encode(), timeout=10).read()
        assert SECRET_TEXT in found.decode()
        with pytest.raises(urllib.error.HTTPError) as again:  # the link is spent
            _opener().open(link, timeout=10)
        assert again.value.code == 401
        again.value.close()
    [errors] = logged
    assert SECRET_TEXT not in errors and "vault combination" not in errors
    assert link.split("token=")[1] not in errors


def test_garbage_bytes_and_idle_connections_do_not_take_the_console_down(sqlite_paths: HostPaths) -> None:
    with console_process(sqlite_paths.home) as link:
        port = int(link.split(":")[2].split("/")[0])
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(20)]
        try:
            for payload in (b"\x00\xff" * 4000, b"GET / HTTP/1.1\r\nHost: " + b"x" * 70_000 + b"\r\n\r\n", b"\r\n\r\n"):
                with socket.create_connection(("127.0.0.1", port), timeout=5) as garbage:
                    garbage.sendall(payload)
                    garbage.recv(1024)
            answer = _opener().open(link, timeout=10)
            assert answer.status == 200 and answer.url.endswith("/queue")
        finally:
            for connection in idle:
                connection.close()


def test_a_port_in_use_fails_in_one_line(sqlite_paths: HostPaths) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        process = subprocess.Popen(
            [sys.executable, "-m", "engram_memory", "console", "--home", str(sqlite_paths.home), "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = process.communicate(timeout=60)
        finally:
            reap(process)
    assert process.returncode == 1 and out == b""
    assert err.decode().startswith(f"engram-memory: error: cannot listen on 127.0.0.1:{port}")
    assert len(err.decode().strip().splitlines()) == 1
