"""The stdio transport itself, spoken as raw JSON-RPC lines to a real `engram-memory serve` process.

Pipes take the event-loop transport; a regular file as stdin or stdout takes the SDK's own. Either way
the wire carries only protocol lines, and a line the server cannot read does not end the session.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engram_memory.host.settings import HostPaths
from engram_memory.mcp.stdio import LINE_LIMIT
from tests.support.homes import bind, make_home
from tests.support.jsonrpc import INITIALIZED, initialize
from tests.support.processes import reap

INITIALIZE = initialize(1, "raw")


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def _list_tools(request_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}


def _list_tools_line(request_id: int) -> bytes:
    return _line(_list_tools(request_id))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> tuple[HostPaths, dict[str, str]]:
    paths = make_home(tmp_path_factory.mktemp("transport") / "home")
    env = {**os.environ, "ENGRAM_BINDING": bind(paths).token, "ENGRAM_EMBEDDING_MODEL": "off"}
    return paths, env


def _command(paths: HostPaths) -> list[str]:
    return [sys.executable, "-m", "engram_memory", "serve", "--home", str(paths.home)]


def _answers(output: bytes) -> dict[int, dict[str, Any]]:
    """Every protocol line by id; any line that is not JSON-RPC fails the test (the wire is ours alone)."""
    answers: dict[int, dict[str, Any]] = {}
    for raw in output.splitlines():
        message = json.loads(raw)
        assert message["jsonrpc"] == "2.0"
        if "id" in message and message["id"] is not None:
            answers[int(message["id"])] = message
    return answers


def _exchange(paths: HostPaths, env: dict[str, str], lines: list[bytes], expect: int) -> dict[int, dict[str, Any]]:
    """Writes lines over a pipe, reads answers until request `expect` is answered, then closes stdin."""
    process = subprocess.Popen(
        _command(paths), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        for line in lines:
            process.stdin.write(line)
        process.stdin.flush()
        answers: dict[int, dict[str, Any]] = {}
        while expect not in answers:
            raw = process.stdout.readline()
            assert raw, "the server closed the wire before answering"
            answers.update(_answers(raw))
        process.stdin.close()
        assert process.wait(timeout=30) == 0
        return answers
    finally:
        reap(process)


def test_pipes_answer_requests_in_the_modern_transport(served: tuple[HostPaths, dict[str, str]]) -> None:
    paths, env = served
    answers = _exchange(paths, env, [_line(INITIALIZE), _line(INITIALIZED), _list_tools_line(2)], expect=2)
    assert answers[1]["result"]["serverInfo"]["name"] == "engram-memory"
    assert len(answers[2]["result"]["tools"]) == 6


def test_an_overlong_line_does_not_end_the_session(served: tuple[HostPaths, dict[str, str]]) -> None:
    paths, env = served
    overlong = b'{"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"x": "' + b"a" * LINE_LIMIT + b'"}}\n'
    answers = _exchange(paths, env, [_line(INITIALIZE), _line(INITIALIZED), overlong, _list_tools_line(3)], expect=3)
    assert 7 not in answers
    assert len(answers[3]["result"]["tools"]) == 6


def test_a_malformed_line_does_not_end_the_session(served: tuple[HostPaths, dict[str, str]]) -> None:
    paths, env = served
    answers = _exchange(
        paths, env, [_line(INITIALIZE), _line(INITIALIZED), b"{not json\n", _list_tools_line(4)], expect=4
    )
    assert len(answers[4]["result"]["tools"]) == 6


def test_a_regular_file_as_stdin_takes_the_sdk_transport(
    served: tuple[HostPaths, dict[str, str]], tmp_path: Path
) -> None:
    paths, env = served
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_line(INITIALIZE) + _line(INITIALIZED) + _list_tools_line(2))
    with requests.open("rb") as source:
        process = subprocess.Popen(
            _command(paths), stdin=source, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0
    assert _answers(output)[1]["result"]["serverInfo"]["name"] == "engram-memory"


def test_a_regular_file_as_stdout_takes_the_sdk_transport(
    served: tuple[HostPaths, dict[str, str]], tmp_path: Path
) -> None:
    paths, env = served
    answers_file = tmp_path / "answers.jsonl"
    with answers_file.open("wb") as sink:
        process = subprocess.Popen(
            _command(paths), stdin=subprocess.PIPE, stdout=sink, stderr=subprocess.DEVNULL, env=env
        )
        assert process.stdin is not None
        try:
            process.stdin.write(_line(INITIALIZE) + _line(INITIALIZED) + _list_tools_line(2))
            process.stdin.flush()
            deadline = time.monotonic() + 60
            while 2 not in _answers(_complete_lines(answers_file)) and time.monotonic() < deadline:
                time.sleep(0.05)
            process.stdin.close()
            assert process.wait(timeout=30) == 0
        finally:
            reap(process)
    answers = _answers(answers_file.read_bytes())
    assert answers[1]["result"]["serverInfo"]["name"] == "engram-memory"
    assert len(answers[2]["result"]["tools"]) == 6


def _complete_lines(path: Path) -> bytes:
    data = path.read_bytes()
    return data[: data.rfind(b"\n") + 1]


def test_the_null_device_as_stdin_takes_the_sdk_transport_and_ends(served: tuple[HostPaths, dict[str, str]]) -> None:
    """The event loop cannot poll /dev/null; the server must still read its end of file and stop."""
    paths, env = served
    done = subprocess.run(
        _command(paths), stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0
    assert done.stdout == b""
