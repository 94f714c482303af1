"""Engine fixtures: an in-process agent over a real home, with a clock the test controls."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def steered(paths: HostPaths, clock: ManualClock) -> Iterator[Engine]:
    with steered_engine(paths, clock=clock) as engine:
        yield engine


@pytest.fixture
def agent(paths: HostPaths, steered: Engine) -> InProcessAgent:
    return InProcessAgent(steered, bind(paths).binding)
