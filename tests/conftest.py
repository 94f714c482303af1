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


def _memory_folder() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK) else None


# Every test's files (pytest's tmp_path, tempfile's folders, the servers' scratch) live in memory where the
# machine has it, as the PostgreSQL cluster does: thousands of SQLite homes commit with fsync, and on a
# disk that cost a sixth of the suite's time. A process SIGKILLed on a tmpfs loses exactly what it loses
# on a disk (the page cache survives it), so the crash tests keep their meaning. Set before pytest
# picks its base folder; an explicit --basetemp, PYTEST_DEBUG_TEMPROOT or TMPDIR still wins.
_MEMORY = _memory_folder()
if _MEMORY is not None and "TMPDIR" not in os.environ:
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", _MEMORY)
    os.environ["TMPDIR"] = _MEMORY
    tempfile.tempdir = None  # tempfile reads TMPDIR again on its next call


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


# -- order: the long tests first ----------------------------------------------------------------------
# Modules whose tests take seconds each (several server processes, kills, fuzzing, overlong lines, the
# embedding model). Run first, they leave the thousands of short tests to even out the two workers' ends;
# run last (as their names sort), one worker sat out the other's long tail for a minute.
LONG_FIRST = (
    "tests/mcp/test_multiprocess.py",
    "tests/reliability/",
    "tests/mcp/test_stdio_bad_lines.py",
    "tests/mcp/test_stdio_semantic.py",
    "tests/mcp/test_stdio_erasure.py",
    "tests/mcp/test_stdio_revocation.py",
    "tests/mcp/test_stdio_transport.py",
    "tests/mcp/test_stdio_review.py",
    "tests/mcp/test_stdio_concurrent_writes.py",
    "tests/host/serve/",
    "tests/host/keys/test_rotation.py",
    "tests/embeddings/",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A stable sort: within each group, pytest's own order (which keeps shared fixtures together) stays."""
    items.sort(key=lambda item: 0 if item.nodeid.startswith(LONG_FIRST) else 1)
