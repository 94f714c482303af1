"""A replicated deployment per module (tests/support/topology.py), and homes on it.

Every module here is marked `slow`: each builds servers of its own (`make test-slow` runs them; CI too).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from engram_memory.host.compose import init_home
from engram_memory.host.settings import HostPaths
from tests.support.postgres import APP_ROLE, OWNER_ROLE
from tests.support.topology import Node, Topology


def topology_home(
    folder: Path,
    topology: Topology,
    *,
    database: str = "engram",
    keys: str = "engram_keys",
    standbys: Sequence[Node] | None = None,
) -> HostPaths:
    """A home `init` made on the primary, its searches and gets sent to `standbys` (all by default),
    once every standby has replayed its making."""
    paths = HostPaths(home=folder)
    primary = topology.primary
    topology.new_database(database)
    topology.new_database(keys)
    chosen = topology.standbys if standbys is None else standbys
    init_home(
        paths,
        primary.url(OWNER_ROLE, database),
        app_role=APP_ROLE,
        vault=primary.url(OWNER_ROLE, keys),
        read_urls=[node.url(OWNER_ROLE, database) for node in chosen],
    )
    topology.caught_up(delayed_too=True)
    return paths


@pytest.fixture(scope="module")
def replicated() -> Iterator[Topology]:
    """A primary, a standby, and a standby replaying 1.5 s late."""
    with Topology.built(standbys=2, delayed_ms=1500) as topology:
        yield topology
