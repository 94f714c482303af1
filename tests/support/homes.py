"""Real host homes for tests: init, key files and signed bindings, exactly as the CLI makes them.

A home lives on either store: `home_on("sqlite" | "postgres", ...)` makes one and, for PostgreSQL,
drops its databases again when the block ends (a session makes thousands of them).
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from engram_memory.contract.binding import Binding
from engram_memory.contract.tools import ALL_TOOLS
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import JournalEvent, Scope, ScopeHead
from engram_memory.host.bindings import issue_binding
from engram_memory.host.compose import init_home, open_engine, open_store
from engram_memory.host.keys.files import create_key_files, load_signing_key
from engram_memory.host.settings import HostPaths
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE
from tests.support.postgres import PostgresCluster, home_databases, make_postgres_home

ALL_GRANTS = frozenset(tool.value for tool in ALL_TOOLS)
# The stores every engine and server test runs on, as test ids say them.
STORES = ("sqlite", "postgres")


@dataclass(frozen=True)
class Issued:
    token: str
    binding: Binding


@functools.cache
def _sqlite_template() -> Path:
    """One SQLite home made by `init_home` per test process (its migrated store and vault, config and
    policy), removed when the process ends."""
    base = Path(tempfile.mkdtemp(prefix="engram-template-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    init_home(HostPaths(home=base / "home"))
    return base / "home"


def make_home(folder: Path) -> HostPaths:
    """A SQLite home as `init` makes it, with key files of its own.

    Copied from a template home (file modes kept) rather than initialised: the migrations are most of
    init's cost. The template's key files are not copied but made anew, as init makes them, so no two
    homes share a KEK, a digest secret or a signing key (a token of one home never verifies in another).
    """
    template = HostPaths(home=_sqlite_template())
    key_files = {
        template.kek_file.name,
        template.secret_file.name,
        template.signing_key_file.name,
        template.recovery_file.name,
    }
    shutil.copytree(template.home, folder, ignore=lambda _dir, names: [n for n in names if n in key_files])
    paths = HostPaths(home=folder)
    create_key_files(paths)
    return paths


@contextmanager
def home_on(store: str, folder: Path, request: pytest.FixtureRequest) -> Iterator[HostPaths]:
    """A fresh home on `store`; a PostgreSQL one gets databases of its own in the session's cluster."""
    if store == "sqlite":
        yield make_home(folder)
        return
    assert store == "postgres", store
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    paths = make_postgres_home(folder, cluster)
    databases = home_databases(paths)  # read now: a test may rewrite config.toml
    try:
        yield paths
    finally:
        for database in databases:
            cluster.retire_database(database)


def bind(
    paths: HostPaths,
    *,
    tenant: str = "tenant-a",
    workspace: str = "workspace-1",
    principal: str = "alice",
    agent_id: str = "agent-1",
    session: str = "session-1",
    purpose_ref: str = PURPOSE,
    grants: frozenset[str] = ALL_GRANTS,
    confirm_mutations: bool = False,
    lifetime_s: int = 3600,
    now_s: int | None = None,
) -> Issued:
    issued = issue_binding(
        load_signing_key(paths),
        tenant=tenant,
        workspace=workspace,
        principal=principal,
        agent_id=agent_id,
        session=session,
        purpose_ref=purpose_ref,
        grants=grants,
        confirm_mutations=confirm_mutations,
        lifetime_s=lifetime_s,
        now_s=int(time.time()) if now_s is None else now_s,
    )
    return Issued(token=issued.token, binding=issued.binding)


@contextmanager
def engine_for(paths: HostPaths) -> Iterator[Engine]:
    with open_engine(paths) as engine:
        yield engine


def journal_of(paths: HostPaths, scope: Scope) -> tuple[list[JournalEvent], ScopeHead | None]:
    """A scope's events and head row, read in one snapshot through the home's own store (as the owner)."""
    store = open_store(paths)
    try:
        with store.read() as tx:
            return list(tx.events(scope)), tx.head(scope)
    finally:
        store.close()


def remember(paths: HostPaths, *texts: str, workspace: str = "workspace-1") -> list[str]:
    """Records of the workspace, each captured and admitted by its agent in process; their ids."""
    with engine_for(paths) as engine:
        agent = InProcessAgent(engine, bind(paths, workspace=workspace).binding)
        return [agent.remember(text) for text in texts]
