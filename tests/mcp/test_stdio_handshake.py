"""A stdio server without a usable binding refuses the handshake on the wire, naming why, on both of its
transports (pipes served from the event loop; anything else through the SDK's): `initialize` and the
2026 era's `server/discover` answer -32603 and never reach the server (a request sent without any
handshake meets the per-call rules: tests/mcp/test_stdio_context.py)."""

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
from tests.support.homes import bind, make_home
from tests.support.jsonrpc import initialize
from tests.support.processes import reap

pytestmark = pytest.mark.stdio

UNAVAILABLE = "Trusted invocation context unavailable: "
REQUESTS = [
    initialize(1, "raw"),
    {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {}},
]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> HostPaths:
    return make_home(tmp_path_factory.mktemp("handshake") / "home")


def _env(token: str | None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("ENGRAM_")}
    env["ENGRAM_EMBEDDING_MODEL"] = "off"
    if token is not None:
        env["ENGRAM_BINDING"] = token
    return env


def _wire(messages: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(message).encode() + b"\n" for message in messages)


def _over_pipes(paths: HostPaths, token: str | None, requests: list[dict[str, Any]] = REQUESTS) -> list[dict[str, Any]]:
    process = subprocess.Popen(
        [sys.executable, "-m", "engram_memory", "serve", "--home", str(paths.home)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(token),
    )
    try:
        out, _ = process.communicate(_wire(requests), timeout=60)
    finally:
        reap(process)
    return [json.loads(line) for line in out.splitlines()]


def _over_files(
    paths: HostPaths, token: str | None, folder: Path, requests: list[dict[str, Any]] = REQUESTS
) -> list[dict[str, Any]]:
    """stdin and stdout regular files: the event loop cannot poll them, so the SDK's transport serves."""
    sent, answers = folder / f"in-{time.monotonic_ns()}", folder / f"out-{time.monotonic_ns()}"
    sent.write_bytes(_wire(requests))
    with sent.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-m", "engram_memory", "serve", "--home", str(paths.home)],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.DEVNULL,
            env=_env(token),
            timeout=60,
            check=False,
        )
    assert done.returncode == 0
    return [json.loads(line) for line in answers.read_bytes().splitlines()]


@pytest.mark.parametrize("transport", ["pipes", "files"])
@pytest.mark.parametrize("binding", ["none", "garbage", "expired"])
def test_a_handshake_without_a_usable_binding_is_refused_naming_why(
    home: HostPaths, tmp_path: Path, transport: str, binding: str
) -> None:
    expired = bind(home, lifetime_s=60, now_s=int(time.time()) - 3600)
    token = {"none": None, "garbage": "garbage", "expired": expired.token}[binding]
    answers = _over_pipes(home, token) if transport == "pipes" else _over_files(home, token, tmp_path)
    by_id = {answer["id"]: answer for answer in answers}
    assert sorted(by_id) == [1, 2]
    why = {
        "none": "no binding given (--binding, --binding-file or ENGRAM_BINDING)",
        "garbage": "the binding token does not verify against this host's key",
        "expired": f"binding {expired.binding.token_id} expired at ",
    }[binding]
    for handshake in (1, 2):
        error = by_id[handshake]["error"]
        assert error["code"] == -32603
        assert error["message"].startswith(UNAVAILABLE + why)


@pytest.mark.parametrize("transport", ["pipes", "files"])
def test_a_usable_binding_completes_the_handshake(home: HostPaths, tmp_path: Path, transport: str) -> None:
    token = bind(home).token
    # the handshake alone: at the end of its input a server may close before answering what followed it
    only = REQUESTS[:1]
    answers = _over_pipes(home, token, only) if transport == "pipes" else _over_files(home, token, tmp_path, only)
    assert answers[0]["id"] == 1 and answers[0]["result"]["serverInfo"]["name"] == "engram-memory"
