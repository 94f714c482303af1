"""Shared fixtures: a real host home on either store, bindings signed by its key, and an in-process engine.

`paths` runs each test that takes it twice, on a SQLite home and on a PostgreSQL home (ids "sqlite"
and "postgres"); `sqlite_paths` and `postgres_paths` are for tests of a mechanism only one store has,
which say so in their names.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.homes import STORES, Issued, bind, engine_for, home_on, make_home
from tests.support.postgres import PostgresCluster, owner_url


@pytest.fixture(params=STORES)
def paths(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HostPaths]:
    with home_on(str(request.param), tmp_path / "home", request) as home:
        yield home


@pytest.fixture
def sqlite_paths(tmp_path: Path) -> HostPaths:
    """A SQLite home, for tests of what only the embedded store has (its files, WAL, FTS5, PRAGMAs)."""
    return make_home(tmp_path / "home")


@pytest.fixture
def postgres_paths(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HostPaths]:
    """A PostgreSQL home, for tests of what only the server store has (roles, VACUUM, snapshots)."""
    with home_on("postgres", tmp_path / "home", request) as home:
        yield home


@pytest.fixture
def engine(paths: HostPaths) -> Iterator[Engine]:
    with engine_for(paths) as running:
        yield running


@pytest.fixture
def alice(paths: HostPaths) -> Issued:
    return bind(paths)


# -- PostgreSQL: one throwaway cluster per session, a fresh database per test ----------------------
# A missing server fails these fixtures (and every test that needs them): it is never a skip.


def _memory_folder() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    # Not under pytest's own temp folder: the server runs as the postgres OS user when the tests run as root,
    # and that user must be able to reach its data and socket folders. In memory where the machine has it:
    # the suite makes two databases for almost every test, and on a slow disk each costs ten times more.
    base = Path(tempfile.mkdtemp(prefix="engram-pg-", dir=_memory_folder()))
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
