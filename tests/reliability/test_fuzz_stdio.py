"""Bad input through the real stdio server (issue 14): every input answered, no crash, no hang, no harm.

One `engram-memory serve` gets a stream of lines: raw garbage (random bytes, torn and nested JSON,
invalid UTF-8, lone surrogates), JSON-RPC requests with random methods and params, and tool calls
whose arguments start valid and are mutated field by field with what breaks validators (wrong
types, nulls, extra fields, NUL and control characters, non-NFC text, lone surrogates, huge or
fractional numbers, boundary lengths, deep nesting). Every request carries its own id and must get
exactly one answer; every garbage line exactly one JSON-RPC error. At the end the server still
answers, its log stayed small, every capture it accepted is accounted for, and `verify` passes.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from engram_memory.engine.verify import verify_store
from tests.reliability.scale import amount, report
from tests.support.homes import bind, engine_for, make_home
from tests.support.jsonrpc import INITIALIZED, initialize
from tests.support.payloads import PURPOSE, capture_args, unique_key
from tests.support.processes import reap
from tests.support.raw import raw_store

SEED = 1415
INITIALIZE = initialize(0, "fuzz")
NASTY_STRINGS = [
    "",
    "\x00",
    "a\x00b",
    "\x1b[2J\x1b[1;1H",
    "e\u0301",  # not NFC
    "\ud800",  # a lone surrogate (sent as a JSON escape)
    "\u202eevil",
    "x" * 8193,
    "x" * 70_000,
    "mem_" + "a" * 26 + "\n",
    "sha256:" + "0" * 64 + "\n",
    "🧪" * 300,
    "운영팀\u3000데이터",
    "../../etc/passwd",
    "' OR 1=1 --",
    "%s%s%n",
]
NASTY_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    2**53,
    -(2**63),
    10**400,
    1.5,
    float("1e308"),
    [],
    {},
    [[[[[[[[[[]]]]]]]]]],
    {"a": {"b": {"c": {}}}},
    *NASTY_STRINGS,
]


def _nasty(rng: random.Random) -> Any:
    return copy.deepcopy(rng.choice(NASTY_VALUES))  # a fresh copy: never the same list in two places


def _tool_arguments(rng: random.Random, record_id: str, candidate_id: str) -> tuple[str, dict[str, Any]]:
    tool = rng.choice(
        [
            "engram_memory_search",
            "engram_memory_get",
            "engram_memory_capture",
            "engram_memory_request_admission",
            "engram_memory_withdraw",
            "engram_memory_forget",
            "engram_memory_nonexistent",
        ]
    )
    valid: dict[str, Any] = {
        "engram_memory_search": {"query": "fuzz note", "purpose_ref": PURPOSE},
        "engram_memory_get": {"record_id": record_id, "purpose_ref": PURPOSE},
        "engram_memory_capture": capture_args(f"Fuzz note {rng.random()}", key=unique_key("fz")),
        "engram_memory_request_admission": {"candidate_id": candidate_id, "idempotency_key": unique_key("fa")},
        "engram_memory_withdraw": {
            "candidate_id": candidate_id,
            "idempotency_key": unique_key("fw"),
            "reason_ref": "r",
        },
        "engram_memory_forget": {"record_id": record_id, "idempotency_key": unique_key("ff"), "reason_ref": "r"},
        "engram_memory_nonexistent": {},
    }[tool]
    return tool, _mutated(rng, valid)


def _paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths_of(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths_of(item, (*prefix, index))
    return found


def _mutated(rng: random.Random, valid: dict[str, Any]) -> Any:
    if rng.random() < 0.05:
        return _nasty(rng)  # the arguments themselves are not an object
    arguments = copy.deepcopy(valid)
    for _ in range(rng.randint(0, 3)):
        paths = _paths_of(arguments)
        if not paths:
            break
        path = rng.choice(paths)
        parent = arguments
        for step in path[:-1]:
            parent = parent[step]
        action = rng.random()
        if action < 0.2 and isinstance(parent, dict):
            parent.pop(path[-1], None)
        elif action < 0.3 and isinstance(parent, dict):
            parent[rng.choice(["extra", "_meta", "__proto__", "tenant", "workspace"])] = _nasty(rng)
        else:
            parent[path[-1]] = _nasty(rng)
    return arguments


def _deep(rng: random.Random) -> bytes:
    depth = rng.choice([10, 300, 5_000, 50_000])
    return b"[" * depth + b"]" * rng.choice([0, depth])


_GARBAGE = [
    lambda rng: bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))).replace(b"\n", b" "),
    lambda rng: json.dumps(INITIALIZE).encode()[: rng.randint(1, 60)],
    _deep,
    lambda rng: b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "\\ud800\\udfff\\ud800"}',
    lambda rng: b"\xc3\x28\xa0\xa1\xe2\x28\xa1\xf0\x28\x8c\xbc",
    lambda rng: b'{"jsonrpc": "2.0", "id": 1e999, "method": "ping"}',
    lambda rng: b"[" + b",".join(b'{"jsonrpc": "2.0", "id": %d, "method": "ping"}' % n for n in range(3)) + b"]",
    lambda rng: b"\xef\xbb\xbf" + b'{"jsonrpc": "2.0", "id": "bom", "method": "ping"}'[: rng.randint(5, 30)],
]


def _garbage(rng: random.Random) -> bytes:
    line: bytes = rng.choice(_GARBAGE)(rng)
    return line


def test_fuzzed_lines_and_arguments_are_all_answered_and_harm_nothing(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    paths = make_home(tmp_path / "home")
    issued = bind(paths)
    with engine_for(paths) as engine:  # something real to aim at
        from tests.support.inprocess import InProcessAgent

        agent = InProcessAgent(engine, issued.binding)
        record_id = agent.remember("A fuzz target record.")
        candidate_id = agent.capture("A fuzz target candidate.")["candidate_id"]
    with raw_store(paths) as db:
        before = db.count("candidates")
    log = (tmp_path / "serve.log").open("wb")
    env = {**os.environ, "ENGRAM_BINDING": issued.token, "ENGRAM_EMBEDDING_MODEL": "off"}
    process = subprocess.Popen(
        [sys.executable, "-m", "engram_memory", "serve", "--home", str(paths.home)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    total = amount(3_000, 100_000)
    answers: dict[object, int] = {}
    null_errors = 0
    accepted_captures = 0

    def read() -> None:
        nonlocal null_errors, accepted_captures
        assert process.stdout is not None
        for line in process.stdout:
            message = json.loads(line)  # the wire carries protocol lines only
            request_id = message.get("id")
            if request_id is None:
                null_errors += 1
                continue
            answers[request_id] = answers.get(request_id, 0) + 1
            envelope = message.get("result", {}).get("structuredContent") or {}
            if envelope.get("ok") and envelope["output"]["value"].get("status") == "committed_pending":
                accepted_captures += 1

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    requests: set[object] = {0}
    garbage = 0
    lines = [json.dumps(INITIALIZE).encode(), json.dumps(INITIALIZED).encode()]
    for n in range(1, total + 1):
        roll = rng.random()
        if roll < 0.15:
            lines.append(_garbage(rng))
            garbage += bool(lines[-1].strip())  # a blank line is owed no answer
            continue
        request_id: object = n if rng.random() < 0.8 else f"req-{n}"
        requests.add(request_id)
        if roll < 0.25:
            method = rng.choice(["ping", "tools/list", "resources/list", "prompts/get", "nope", "initialize", ""])
            message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
            if rng.random() < 0.5:
                message["params"] = rng.choice([{}, {"cursor": "x"}, {"name": 5}, {"a": [1] * 50}])
        else:
            tool, arguments = _tool_arguments(rng, record_id, candidate_id)
            message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
            message["params"] = {"name": tool, "arguments": arguments}
        lines.append(json.dumps(message).encode())
    final_id = "final"
    lines.append(json.dumps({"jsonrpc": "2.0", "id": final_id, "method": "tools/list"}).encode())
    for line in lines:
        process.stdin.write(line + b"\n")
    process.stdin.flush()
    deadline = time.monotonic() + amount(300, 1_800)
    expected = len(requests) + 1  # and the final one
    while len(answers) < expected and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.05)
    process.stdin.close()
    try:
        assert process.wait(timeout=60) == 0  # ends on EOF
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()
    reader.join(timeout=60)
    reap(process)

    unanswered = [request_id for request_id in requests if answers.get(request_id) != 1]
    assert unanswered == [], unanswered[:20]
    assert answers.get(final_id) == 1
    assert null_errors >= garbage  # each garbage line one error (a batch or a bad id adds its own)
    assert (tmp_path / "serve.log").stat().st_size < 200_000
    with raw_store(paths) as db:
        assert db.count("candidates") == before + accepted_captures  # every new candidate was answered as one
    with engine_for(paths) as engine:
        assert verify_store(engine.deps, full=True).first is None
    report("fuzz inputs tried over stdio", total, target=">= 100,000")
    report("fuzz inputs without exactly one answer", len(unanswered), target="0")
