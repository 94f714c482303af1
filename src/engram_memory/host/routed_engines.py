"""Serving a home whose tenants live in several PostgreSQL clusters (tenants.toml): one engine pair per
cluster, and each agent call answered by the engine of the cluster its binding's tenant lives in now.

The routing map is read again whenever the file changed (host/tenant_routes.py), before each call, so a
tenant moved while agents work is served from its new cluster from the next call on; the old cluster
refuses the tenant's writes from the moment the move began (a retriable STORE_UNAVAILABLE), so nothing a
call wrote can be left behind there. A cluster named for the first time after the server started gets
its agents' engine on its first call; its housekeeping waits for the next start.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

from engram_memory.contract.binding import Binding
from engram_memory.contract.errors import ProtocolFault
from engram_memory.engine.engine import AgentCall, AnswersCalls, Engine
from engram_memory.host.tenant_routes import HOME_CLUSTER, RoutesWatcher


@dataclass(frozen=True, slots=True)
class Serving:
    """What `serve` runs: `agents` answers calls; `owner` (the home's) the readiness probe, sign-in and
    start-up checks; `owners` (the home's first) the housekeeping, re-indexing and checks of every cluster."""

    agents: AnswersCalls
    owner: Engine
    owners: Sequence[Engine]


class RoutedAgents:
    """Answers each call with its tenant's cluster's engine. Thread-safe."""

    def __init__(self, watcher: RoutesWatcher, engines: dict[str, Engine], opener: Callable[[str], Engine]) -> None:
        self._watcher = watcher
        self._engines = engines
        self._open = opener
        self._lock = threading.Lock()

    def _engine_of(self, binding: Binding | None) -> Engine:
        cluster = HOME_CLUSTER if binding is None else self._watcher.current().cluster_of(binding.tenant)
        engine = self._engines.get(cluster)
        if engine is not None:
            return engine
        with self._lock:
            if cluster not in self._engines:
                self._engines[cluster] = self._open(cluster)
            return self._engines[cluster]

    def handle(self, binding: Binding | None, tool_name: str, arguments: object) -> dict[str, Any]:
        return self._engine_of(binding).handle(binding, tool_name, arguments)

    def handle_group(self, calls: Sequence[AgentCall]) -> list[dict[str, Any] | ProtocolFault]:
        """Each cluster's calls as one group of its own, answered in the order they came."""
        by_engine: dict[int, tuple[Engine, list[int]]] = {}
        for index, call in enumerate(calls):
            engine = self._engine_of(call.binding)
            by_engine.setdefault(id(engine), (engine, []))[1].append(index)
        outcomes: list[dict[str, Any] | ProtocolFault | None] = [None] * len(calls)
        for engine, indexes in by_engine.values():
            for index, outcome in zip(indexes, engine.handle_group([calls[i] for i in indexes]), strict=True):
                outcomes[index] = outcome
        return [outcome for outcome in outcomes if outcome is not None]

    def vector_queue_depth(self) -> int:
        return sum(engine.vector_queue_depth() for engine in list(self._engines.values()))


@contextmanager
def routed_serving(
    watcher: RoutesWatcher, clusters: Sequence[str], open_engine: Callable[..., AbstractContextManager[Engine]]
) -> Iterator[Serving]:
    """`open_engine(cluster=..., runtime=...)` opens one engine; every cluster's pair is opened now."""
    with ExitStack() as stack:
        lock = threading.Lock()
        owners = [stack.enter_context(open_engine(cluster=name)) for name in clusters]
        agents = {name: stack.enter_context(open_engine(cluster=name, runtime=True)) for name in clusters}

        def opener(cluster: str) -> Engine:
            with lock:
                return stack.enter_context(open_engine(cluster=cluster, runtime=True))

        yield Serving(RoutedAgents(watcher, agents, opener), owners[0], owners)
