"""Engine fixtures: in-process agents over a real home on either store, with a clock the test controls.

`steered` is the host's engine (the owner role on PostgreSQL); `served` answers agent calls as `serve`
does (the runtime role, behind row-level security); on SQLite the two are one engine.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine, steered_engines
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def engines(paths: HostPaths, clock: ManualClock) -> Iterator[tuple[Engine, Engine]]:
    with steered_engines(paths, clock=clock) as pair:
        yield pair


@pytest.fixture
def steered(engines: tuple[Engine, Engine]) -> Engine:
    return engines[1]


@pytest.fixture
def served(engines: tuple[Engine, Engine]) -> Engine:
    return engines[0]


@pytest.fixture
def agent(paths: HostPaths, served: Engine) -> InProcessAgent:
    return InProcessAgent(served, bind(paths).binding)


@pytest.fixture
def lexical_agent(paths: HostPaths, clock: ManualClock) -> Iterator[InProcessAgent]:
    """An agent of an engine without an embedding model: lexical ranking only, as when the extra is missing."""
    with steered_engine(paths, clock=clock, semantic=False) as engine:
        yield InProcessAgent(engine, bind(paths).binding)
