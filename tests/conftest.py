"""Shared fixtures: a real host home on disk, bindings signed by its key, and an in-process engine."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.homes import Issued, bind, engine_for, make_home
from tests.support.postgres import PostgresCluster, owner_url


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


# -- PostgreSQL: one throwaway cluster per session, a fresh database per test ----------------------
# A missing server fails these fixtures (and every test that needs them): it is never a skip.


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    # Not under pytest's own temp folder: the server runs as the postgres OS user when the tests run as root,
    # and that user must be able to reach its data and socket folders.
    base = Path(tempfile.mkdtemp(prefix="engram-pg-"))
    cluster = PostgresCluster(base)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_url(postgres_cluster: PostgresCluster) -> str:
    """The owner role's URL of a fresh, empty database."""
    return owner_url(postgres_cluster, postgres_cluster.new_database())
