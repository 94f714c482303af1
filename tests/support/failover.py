"""A failover drill: writers capture and admit while the primary dies and its synchronous standby is
promoted; each retriable error is retried with the same idempotency key, as the contract tells agents.
Shared by tests/topology/test_failover.py and bench/replicas.py."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from engram_memory.engine.engine import Engine
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE, capture_args, unique_key
from tests.support.topology import Topology

RETRIABLE = {"STORE_UNAVAILABLE", "MUTATION_OUTCOME_UNKNOWN"}
GIVE_UP_S = 90.0  # a call still refused after this long fails the drill


@dataclass
class Drill:
    acknowledged: list[str] = field(default_factory=list)  # record ids, in the order they were acknowledged
    retried: list[str] = field(default_factory=list)  # the error codes answered meanwhile
    before_crash: int = 0
    unavailable_s: float = 0.0  # from the crash to the first acknowledged write after it
    lost: list[str] = field(default_factory=list)  # acknowledged, but not found on the new primary


def _until_acknowledged(
    agent: InProcessAgent, tool: str, arguments: dict[str, Any], deadline: float, retried: list[str]
) -> dict[str, Any]:
    while True:
        envelope = agent.call(tool, arguments)
        if envelope["ok"]:
            value: dict[str, Any] = envelope["output"]["value"]
            return value
        if envelope["error"]["code"] not in RETRIABLE:
            raise AssertionError(envelope)
        retried.append(envelope["error"]["code"])
        if time.monotonic() > deadline:
            raise TimeoutError("writes did not come back")
        time.sleep(0.05)


def failover_drill(engine: Engine, binding: Any, topology: Topology, *, writers: int, each_side: int) -> Drill:
    """`each_side` acknowledged notes before the crash, and as many after it."""
    drill = Drill()
    stop = threading.Event()
    lock = threading.Lock()
    crashed_at: list[float] = []
    agent = InProcessAgent(engine, binding)

    def write(writer: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            deadline = time.monotonic() + GIVE_UP_S
            text = f"Writer {writer} note {n}: the build cache lives on volume v{writer}-{n}."
            captured = _until_acknowledged(agent, "engram_memory_capture", capture_args(text), deadline, drill.retried)
            admission = {"candidate_id": captured["candidate_id"], "idempotency_key": unique_key("admit")}
            outcome = _until_acknowledged(agent, "engram_memory_request_admission", admission, deadline, drill.retried)
            if outcome["outcome"]["status"] != "accepted":
                raise AssertionError(outcome)
            with lock:
                drill.acknowledged.append(outcome["outcome"]["record_id"])
                if crashed_at and not drill.unavailable_s and len(drill.acknowledged) > drill.before_crash:
                    drill.unavailable_s = time.monotonic() - crashed_at[0]

    threads = [threading.Thread(target=write, args=(number,)) for number in range(writers)]
    for thread in threads:
        thread.start()
    try:
        while len(drill.acknowledged) < each_side:
            time.sleep(0.02)
        with lock:
            drill.before_crash = len(drill.acknowledged)
            crashed_at.append(time.monotonic())
        topology.primary.crash()
        topology.standbys[0].promote()
        deadline = time.monotonic() + GIVE_UP_S
        while len(drill.acknowledged) < drill.before_crash + each_side and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=GIVE_UP_S * 2)
    drill.lost = [
        record_id
        for record_id in drill.acknowledged
        if not agent.call("engram_memory_get", {"record_id": record_id, "purpose_ref": PURPOSE})["ok"]
    ]
    return drill
