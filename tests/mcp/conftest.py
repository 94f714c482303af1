"""Fixtures of the stdio conformance suite: one shared host home, servers started once per binding and era.

A server start costs about a second, so every (binding, era) pair gets exactly one `engram-memory serve`
process for the whole session (`pool`), closed at the end. The shared home exists once per store (SQLite and
PostgreSQL), so each test runs on both. Tests that rewrite the policy or must stop their server get
their own home (see the modules that need one).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram_memory.host.settings import HostPaths
from tests.mcp.helpers import ERAS, HostCli, Pool
from tests.support.agents import McpAgent
from tests.support.homes import STORES, home_on


@pytest.fixture(scope="session", params=STORES)
def shared_home(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostPaths]:
    """One home per store; every test on the shared servers runs once on each."""
    store = str(request.param)
    with home_on(store, tmp_path_factory.mktemp(f"stdio-{store}") / "home", request) as home:
        yield home


@pytest.fixture(scope="session")
def pool(shared_home: HostPaths, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pool]:
    running = Pool(shared_home, tmp_path_factory.mktemp("stdio-scratch"))
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="session")
def host(pool: Pool) -> HostCli:
    return pool.host


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    """The protocol era: 'legacy' (initialize handshake) or 'auto' (the 2026-07-28 modern era)."""
    return str(request.param)


@pytest.fixture
def alice_era(pool: Pool, era: str) -> McpAgent:
    """Alice's fully granted agent in tenant-a/workspace-1, in the era under test."""
    return pool.agent("alice", era)


@pytest.fixture(scope="session")
def alice_modern(pool: Pool) -> McpAgent:
    """Alice's fully granted agent in the modern era, for tests that are not about the era."""
    return pool.agent("alice", "auto")
