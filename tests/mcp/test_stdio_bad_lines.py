"""Every line a client sends over stdio gets its answer, however broken (JSON-RPC 2.0 §4.2, §5.1).

A real `engram-memory serve` reads raw lines over pipes: text that is not JSON or not UTF-8 is -32700,
JSON that is not a request object (a batch, a null or boolean id, no `jsonrpc`, no method) is -32600
with the request's id when one can be read, and the session goes on. Notifications and blank lines
are never answered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from engram_memory.host.settings import HostPaths
from engram_memory.mcp.stdio import LINE_LIMIT
from tests.support.homes import bind, make_home
from tests.support.jsonrpc import INITIALIZED, initialize
from tests.support.processes import reap

PARSE_ERROR, INVALID_REQUEST = -32700, -32600
INITIALIZE = initialize(1, "raw")
LAST = 99

# (line, the (code, id) of the one error answer it is owed, or None when it is owed none)
CASES: list[tuple[bytes, tuple[int, int | str | None] | None]] = [
    (b"{not json", (PARSE_ERROR, None)),
    (b"\xff\xfe\x00garbage", (PARSE_ERROR, None)),
    (b'{"jsonrpc": "2.0", "id": 20, "method": "tools/list"', (PARSE_ERROR, None)),
    (b"[" * 100_000 + b"]" * 100_000, (PARSE_ERROR, None)),
    (b'[{"jsonrpc": "2.0", "id": 21, "method": "tools/list"}]', (INVALID_REQUEST, None)),
    (b"[]", (INVALID_REQUEST, None)),
    (b'"a string"', (INVALID_REQUEST, None)),
    (b"42", (INVALID_REQUEST, None)),
    (b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', (INVALID_REQUEST, None)),
    (b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', (INVALID_REQUEST, None)),
    (b'{"jsonrpc": "2.0", "id": 2.5, "method": "tools/list"}', (INVALID_REQUEST, None)),
    (b'{"id": 22, "method": "tools/list"}', (INVALID_REQUEST, 22)),
    (b'{"jsonrpc": "1.0", "id": 23, "method": "tools/list"}', (INVALID_REQUEST, 23)),
    (b'{"jsonrpc": "2.0", "id": 24}', (INVALID_REQUEST, 24)),
    (b'{"jsonrpc": "2.0", "id": 25, "method": 7}', (INVALID_REQUEST, 25)),
    (b'{"jsonrpc": "2.0", "id": "k-26", "method": "tools/list", "params": 5}', (INVALID_REQUEST, "k-26")),
    (b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "tools/list"}', (INVALID_REQUEST, None)),
    (b"", None),
    (b"   \t", None),
    (b'{"jsonrpc": "2.0", "method": "notifications/whatever", "params": 5}', None),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[HostPaths, dict[str, str]]:
    paths = make_home(tmp_path_factory.mktemp("bad-lines") / "home")
    env = {**os.environ, "ENGRAM_BINDING": bind(paths).token, "ENGRAM_EMBEDDING_MODEL": "off"}
    return paths, env


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _exchange(served: tuple[HostPaths, dict[str, str]], lines: list[bytes]) -> list[dict[str, Any]]:
    """Every message the server wrote until it answered request LAST (sent after `lines`)."""
    paths, env = served
    process = subprocess.Popen(
        [sys.executable, "-m", "engram_memory", "serve", "--home", str(paths.home)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(_line(INITIALIZE) + _line(INITIALIZED))
        for line in lines:
            process.stdin.write(line + b"\n")
        process.stdin.write(_line({"jsonrpc": "2.0", "id": LAST, "method": "tools/list"}))
        process.stdin.flush()
        messages: list[dict[str, Any]] = []
        while not any(message.get("id") == LAST for message in messages):
            raw = process.stdout.readline()
            assert raw, "the server closed the wire before answering"
            messages.append(json.loads(raw))
        process.stdin.close()
        assert process.wait(timeout=30) == 0
        return messages
    finally:
        reap(process)


def _errors(messages: list[dict[str, Any]]) -> list[tuple[int, int | str | None]]:
    return [(message["error"]["code"], message["id"]) for message in messages if "error" in message]


def test_every_broken_line_gets_exactly_its_answer_in_order_and_the_session_goes_on(
    served: tuple[HostPaths, dict[str, str]],
) -> None:
    messages = _exchange(served, [line for line, _ in CASES])
    assert _errors(messages) == [owed for _, owed in CASES if owed is not None]
    assert all(message["jsonrpc"] == "2.0" for message in messages)
    [last] = [message for message in messages if message.get("id") == LAST]
    assert len(last["result"]["tools"]) == 6


@pytest.mark.parametrize("depth", [100, 300])
def test_a_request_nested_deep_is_answered_by_its_id(served: tuple[HostPaths, dict[str, str]], depth: int) -> None:
    nested = b'{"jsonrpc": "2.0", "id": 30, "method": "tools/list", "params": {"a": ' + b"[" * depth + b"]" * depth
    messages = _exchange(served, [nested + b"}}"])
    assert [message for message in messages if message.get("id") == 30], messages


@pytest.mark.parametrize("extra", [1, 3 * LINE_LIMIT])
def test_a_line_over_the_limit_is_answered_once_and_skipped_to_its_end(
    served: tuple[HostPaths, dict[str, str]], extra: int
) -> None:
    overlong = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": "' + b"a" * (LINE_LIMIT + extra)
    messages = _exchange(served, [overlong + b'"}}', b"{not json"])
    assert _errors(messages) == [(INVALID_REQUEST, None), (PARSE_ERROR, None)]
    assert not [message for message in messages if message.get("id") == 7]
