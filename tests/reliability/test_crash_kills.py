"""Crash consistency (issue 14): SIGKILL a real `serve` under load, at random moments, again and again.

Each round starts `engram-memory serve` on one home (SQLite, then PostgreSQL), over stdio or over
streamable HTTP, sends it captures and admissions (over stdio pipelined as raw JSON-RPC lines, so the
server is inside a group commit most of the time; over HTTP as concurrent POSTs from eight clients),
and kills it with SIGKILL after a random delay; in the first round and in about half the others, only
after the first answers came back and a second wave was sent, so that acknowledged calls are checked
on any machine, however slow its commits. Then, in a fresh engine on the same files:

* every mutation the server acknowledged is there, with the ids it answered;
* retrying every call that was sent, with its key and arguments, gives exactly one effect: a replay
  of the acknowledged answer, or the first (and only) application of one that never committed;
* `verify` (full) finds nothing wrong.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

import httpx2
import pytest

from engram_memory.contract.tools import Tool
from engram_memory.engine.verify import verify_store
from engram_memory.host.compose import store_settings
from engram_memory.host.settings import HostPaths
from tests.reliability.scale import amount, report
from tests.support.homes import Issued, bind, engine_for
from tests.support.http_agents import HttpServer
from tests.support.jsonrpc import INITIALIZED, initialize
from tests.support.payloads import capture_args, unique_key
from tests.support.processes import reap
from tests.support.raw import raw_store

SEED = 1414
INITIALIZE = initialize(0, "kills")


class Round(Protocol):
    """One server process, the calls sent to it, and the answers that came back before it died."""

    sent: dict[int, tuple[Tool, dict[str, Any]]]
    answers: dict[int, dict[str, Any]]

    def call(self, request_id: int, tool: Tool, arguments: dict[str, Any]) -> None: ...
    def kill(self) -> None: ...


class StdioRound:
    """`serve` over stdio, one binding; answers are read off its stdout by a thread."""

    def __init__(self, paths: HostPaths, issued: Issued) -> None:
        env = {**os.environ, "ENGRAM_BINDING": issued.token, "ENGRAM_EMBEDDING_MODEL": "off"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "engram_memory", "serve", "--home", str(paths.home)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.sent: dict[int, tuple[Tool, dict[str, Any]]] = {}
        self.answers: dict[int, dict[str, Any]] = {}
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._write(INITIALIZE)
        self._write(INITIALIZED)
        self._ready = time.monotonic()

    def _write(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            pass

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                return  # the last line, torn by the kill
            if isinstance(message.get("id"), int):
                self.answers[message["id"]] = message

    def call(self, request_id: int, tool: Tool, arguments: dict[str, Any]) -> None:
        self.sent[request_id] = (tool, arguments)
        params = {"name": tool.value, "arguments": arguments}
        self._write({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})

    def wait_for_initialize(self) -> None:
        deadline = time.monotonic() + 60
        while 0 not in self.answers and time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError("serve exited before it answered initialize")
            time.sleep(0.01)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self._reader.join(timeout=30)  # the kill ends its stdout: the reader sees the end of it
        reap(self.process)
        self._reader.join(timeout=30)


class HttpRound:
    """`serve --http`, a bearer token per request; eight clients POST the calls concurrently."""

    CLIENTS = 8

    def __init__(self, paths: HostPaths, issued: Issued, log_file: Path) -> None:
        self.server = HttpServer(paths.home, log_file)
        self.sent: dict[int, tuple[Tool, dict[str, Any]]] = {}
        self.answers: dict[int, dict[str, Any]] = {}
        self._headers = {"Authorization": f"Bearer {issued.token}", "Accept": "application/json, text/event-stream"}
        self._client = httpx2.Client(timeout=30, limits=httpx2.Limits(max_connections=self.CLIENTS))
        self._pool = ThreadPoolExecutor(max_workers=self.CLIENTS)

    def _post(self, request_id: int, message: dict[str, Any]) -> None:
        try:
            answer = self._client.post(self.server.url, json=message, headers=self._headers)
            self.answers[request_id] = answer.json()
        except (httpx2.TransportError, ValueError):
            pass  # cut by the kill: no answer, so the call is not acknowledged

    def call(self, request_id: int, tool: Tool, arguments: dict[str, Any]) -> None:
        self.sent[request_id] = (tool, arguments)
        params = {"name": tool.value, "arguments": arguments}
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        self._pool.submit(self._post, request_id, message)

    def kill(self) -> None:
        self.server.process.send_signal(signal.SIGKILL)
        self.server.process.wait(timeout=30)
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._client.close()
        self.server.stop()


def _wait_for_an_answer(work: Round) -> None:
    deadline = time.monotonic() + 120
    while not any(request_id in work.sent for request_id in list(work.answers)):
        assert time.monotonic() < deadline, "no call was answered"
        time.sleep(0.005)


def _acknowledged(work: Round) -> dict[int, dict[str, Any]]:
    """The tool results (envelopes) of the calls answered ok before the kill."""
    done = {}
    for request_id, message in work.answers.items():
        envelope = message.get("result", {}).get("structuredContent")
        if request_id in work.sent and isinstance(envelope, dict) and envelope.get("ok"):
            done[request_id] = envelope["output"]["value"]
    return done


def _load(work: Round, rng: random.Random, candidates: list[str], first_id: int) -> int:
    """Pipelines captures and admissions of earlier candidates; returns the next free request id."""
    request_id = first_id
    for _ in range(rng.randint(40, 120)):
        if candidates and rng.random() < 0.4:
            candidate = candidates.pop(rng.randrange(len(candidates)))
            work.call(
                request_id, Tool.REQUEST_ADMISSION, {"candidate_id": candidate, "idempotency_key": unique_key("a")}
            )
        else:
            work.call(request_id, Tool.CAPTURE, capture_args(f"Kill round note {request_id}: fact {rng.random()}"))
        request_id += 1
    return request_id


def _ids(value: dict[str, Any]) -> tuple[str | None, str | None, int | None]:
    outcome = value.get("outcome", {})
    return value.get("candidate_id") or outcome.get("candidate_id"), outcome.get("record_id"), value.get("cursor")


def _replayed(tool: Tool, value: dict[str, Any]) -> bool:
    """A capture answers a replay as `duplicate_exact`; the other tools say `replayed`."""
    return value.get("status") == "duplicate_exact" if tool is Tool.CAPTURE else value.get("replayed") is True


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_sigkill_under_load_loses_no_acknowledged_mutation_and_retries_apply_once(
    paths: HostPaths, transport: str, tmp_path: Path
) -> None:
    rng = random.Random(SEED)
    issued = bind(paths)
    store = "PostgreSQL" if store_settings(paths).is_postgres else "SQLite"
    kills, checked, retried = amount(3, 50) if transport == "stdio" else amount(2, 20), 0, 0
    candidates: list[str] = []
    capture_keys: set[str] = set()
    admitted: set[str] = set()
    next_id = 1
    for number in range(kills):
        work: Round
        if transport == "stdio":
            work = StdioRound(paths, issued)
            work.wait_for_initialize()
        else:
            work = HttpRound(paths, issued, tmp_path / "serve.log")
        next_id = _load(work, rng, candidates, next_id)
        if number == 0 or rng.random() < 0.5:  # however slow the machine, some rounds have answers to check
            _wait_for_an_answer(work)
            next_id = _load(work, rng, candidates, next_id)  # a second wave, in flight when the kill lands
        time.sleep(rng.uniform(0.0, 0.4))  # the kill lands anywhere: mid-group, mid-commit, between calls
        work.kill()
        acknowledged = _acknowledged(work)
        with engine_for(paths) as engine:
            for request_id, (tool, arguments) in work.sent.items():
                first = engine.handle(issued.binding, tool, arguments)
                again = engine.handle(issued.binding, tool, arguments)
                assert first["ok"] and again["ok"], (first, again)
                value, replay = first["output"]["value"], again["output"]["value"]
                assert _replayed(tool, replay) and _ids(replay) == _ids(value)
                if request_id in acknowledged:
                    assert _replayed(tool, value) and _ids(value) == _ids(acknowledged[request_id])
                    checked += 1
                else:
                    retried += 1
                if tool is Tool.CAPTURE and value["candidate_id"] not in admitted:
                    candidates.append(value["candidate_id"])
                    admitted.add(value["candidate_id"])  # sent for admission at most once
            problems = verify_store(engine.deps, full=True)
            assert problems.first is None, problems.first
        capture_keys |= {args["idempotency_key"] for tool, args in work.sent.values() if tool is Tool.CAPTURE}
    assert checked > 0  # the check above was not vacuous
    with raw_store(paths) as db:  # one candidate per capture key: no call took effect twice
        assert db.count("candidates") == len(capture_keys)
    where = f"{store}, {transport}"
    report(f"SIGKILLs of serve survived ({where})", kills, target=">= 50 in all")
    report(f"acknowledged mutations checked after a kill ({where})", checked, target="0 lost")
    report(f"in-flight calls retried after a kill ({where})", retried, target="exactly one effect each")
