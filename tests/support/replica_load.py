"""A team's agents on one server process over a replicated store: searching, and now and then writing
and reading their own write back at once. Shared by tests/topology and bench/replicas.py."""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from engram_memory.engine.engine import Engine
from engram_memory.stores.postgres.routing import RoutingStats
from engram_memory.stores.postgres.store import PostgresStore
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE
from tests.support.topology import Node

TOPICS = (
    ("deploy", "The {n} deploy of the billing service waits for the database migration ticket {t}."),
    ("oncall", "On-call handover {n}: the pager rotation moves to the platform team, see ticket {t}."),
    ("budget", "Budget review {n} approved two more build agents for the release pipeline, ticket {t}."),
    ("security", "Security scan {n} found an outdated TLS library in the gateway image, ticket {t}."),
    ("design", "Design decision {n}: search results are cached per workspace for sixty seconds, ticket {t}."),
)


def note(number: int) -> tuple[str, str]:
    """A note and the word only it contains."""
    _, template = TOPICS[number % len(TOPICS)]
    token = f"tk{number}q{number * 7919 % 10007}"
    return template.format(n=number, t=token), token


@dataclass
class LoadFigures:
    seconds: float
    searches: int = 0
    writes: int = 0
    stale: int = 0  # searches for an agent's own note, just written, that missed it
    latencies_ms: list[float] = field(default_factory=list)
    routing: RoutingStats | None = None
    primary_cpu_s: float = 0.0

    @property
    def standby_share(self) -> float:
        if self.routing is None:
            return 0.0
        total = self.routing.standby_reads + self.routing.fallbacks
        return self.routing.standby_reads / total if total else 0.0


def _ids(value: dict[str, Any]) -> list[str]:
    return [packet["record"]["record_id"] for packet in value["records"]]


def team_load(
    engine: Engine, binding: Any, primary: Node, *, agents: int, seconds: float, write_every: int, first: int
) -> LoadFigures:
    """`agents` threads for `seconds`: each searches a topic, and every `write_every`-th step remembers a
    note (numbered from `first` on) and searches for it at once."""
    store = engine.deps.store
    assert isinstance(store, PostgresStore)
    before = store.routing_stats()
    figures = LoadFigures(seconds=seconds)
    lock = threading.Lock()
    numbers = iter(range(first, first + 10_000_000))
    cpu_before = primary.cpu_s()
    deadline = time.monotonic() + seconds

    def agent_loop(seed: int) -> None:
        agent = InProcessAgent(engine, binding)
        rng = random.Random(seed)
        step = 0
        while time.monotonic() < deadline:
            step += 1
            if step % write_every == 0:
                with lock:
                    number = next(numbers)
                text, token = note(number)
                record_id = agent.remember(text)
                started = time.perf_counter()
                found = _ids(agent.value("engram_memory_search", {"query": token, "purpose_ref": PURPOSE}))
                took = (time.perf_counter() - started) * 1000
                with lock:
                    figures.writes += 1
                    figures.searches += 1
                    figures.stale += record_id not in found
                    figures.latencies_ms.append(took)
                continue
            topic = rng.choice(TOPICS)[0]
            started = time.perf_counter()
            agent.value("engram_memory_search", {"query": topic, "purpose_ref": PURPOSE})
            took = (time.perf_counter() - started) * 1000
            with lock:
                figures.searches += 1
                figures.latencies_ms.append(took)

    threads = [threading.Thread(target=agent_loop, args=(seed,)) for seed in range(agents)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    figures.primary_cpu_s = primary.cpu_s() - cpu_before
    after = store.routing_stats()
    if after is not None:
        base = before or RoutingStats()
        after.standby_reads -= base.standby_reads
        after.fallbacks -= base.fallbacks
        after.failures -= base.failures
        after.waits_s = after.waits_s[len(base.waits_s) :]
        figures.routing = after
    return figures
