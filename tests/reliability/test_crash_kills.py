"""Crash consistency (issue 14): SIGKILL a real `serve` under load, at random moments, again and again.

Each round starts `engram-memory serve` over stdio on one home (SQLite, then PostgreSQL), pipelines captures and
admissions at it as raw JSON-RPC lines (so the server is inside a group commit most of the time),
and kills it with SIGKILL after a random delay. Then, in a fresh engine on the same files:

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
from typing import Any

from engram_memory.contract.tools import Tool
from engram_memory.engine.verify import verify_store
from engram_memory.host.compose import store_settings
from engram_memory.host.settings import HostPaths
from tests.reliability.scale import amount, report
from tests.support.homes import Issued, bind, engine_for
from tests.support.jsonrpc import INITIALIZED, initialize
from tests.support.payloads import capture_args, unique_key
from tests.support.raw import raw_store

SEED = 1414
INITIALIZE = initialize(0, "kills")


class Round:
    """One server process, the calls sent to it, and the answers that came back before it died."""

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
        self._reader.join(timeout=30)

    def acknowledged(self) -> dict[int, dict[str, Any]]:
        """The tool results (envelopes) of the calls answered ok before the kill."""
        done = {}
        for request_id, message in self.answers.items():
            envelope = message.get("result", {}).get("structuredContent")
            if request_id in self.sent and isinstance(envelope, dict) and envelope.get("ok"):
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


def test_sigkill_under_load_loses_no_acknowledged_mutation_and_retries_apply_once(paths: HostPaths) -> None:
    rng = random.Random(SEED)
    issued = bind(paths)
    store = "PostgreSQL" if store_settings(paths).is_postgres else "SQLite"
    kills, checked, retried = amount(3, 50), 0, 0
    candidates: list[str] = []
    capture_keys: set[str] = set()
    admitted: set[str] = set()
    next_id = 1
    for _ in range(kills):
        work = Round(paths, issued)
        work.wait_for_initialize()
        next_id = _load(work, rng, candidates, next_id)
        time.sleep(rng.uniform(0.0, 0.4))  # the kill lands anywhere: mid-group, mid-commit, between calls
        work.kill()
        acknowledged = work.acknowledged()
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
    with raw_store(paths) as db:  # one candidate per capture key: no call took effect twice
        assert db.count("candidates") == len(capture_keys)
    report(f"SIGKILLs survived ({store})", kills, target=">= 50")
    report(f"acknowledged mutations checked after a kill ({store})", checked, target="0 lost")
    report(f"in-flight calls retried after a kill ({store})", retried, target="exactly one effect each")
