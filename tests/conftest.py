"""Shared fixtures: a real host home on disk, bindings signed by its key, and an in-process engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.homes import Issued, bind, engine_for, make_home


@pytest.fixture
def paths(tmp_path: Path) -> HostPaths:
    return make_home(tmp_path / "home")


@pytest.fixture
def engine(paths: HostPaths) -> Iterator[Engine]:
    with engine_for(paths) as running:
        yield running


@pytest.fixture
def alice(paths: HostPaths) -> Issued:
    return bind(paths)
