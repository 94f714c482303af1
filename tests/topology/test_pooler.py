"""The contract through PgBouncer in transaction mode: a real stdio server whose store and vault are
reached through the pooler, the owner's work (migrations, erasure) through the direct URL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engram_memory.host.compose import open_engine
from engram_memory.host.settings import HostPaths
from tests.host.clirun import cli
from tests.mcp.helpers import (
    CAPTURE,
    assert_failure,
    capture,
    forget_now,
    found_ids,
    get,
    ok_value,
    remember,
    withdraw_now,
)
from tests.support.agents import StdioAgent
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE, capture_args
from tests.support.postgres import APP_ROLE, OWNER_ROLE
from tests.support.topology import Topology

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pooled() -> Iterator[Topology]:
    with Topology.built(standbys=1, pooler=True) as topology:
        yield topology


def pooled_home(folder: Path, topology: Topology, name: str, *, standby: bool = True) -> HostPaths:
    """As docs/operations.md says: `init` through the pooler with the primary's direct URL (and a standby
    for searches and gets), then `prepared_statements = false` in config.toml."""
    assert topology.bouncer is not None
    primary, bouncer, replica = topology.primary, topology.bouncer, topology.standbys[0]
    store, keys = topology.new_database(name), topology.new_database(f"{name}_keys")
    made = cli(
        "init",
        "--store",
        bouncer.url(OWNER_ROLE, store),
        "--app-role",
        APP_ROLE,
        "--vault",
        bouncer.url(OWNER_ROLE, keys),
        "--direct-url",
        primary.url(OWNER_ROLE, store),
        *(["--read-url", replica.url(OWNER_ROLE, store)] if standby else []),
        "--home",
        str(folder),
        timeout=120,
    )
    assert made.code == 0, made.stderr
    paths = HostPaths(home=folder)
    with paths.config.open("a", encoding="utf-8") as config:
        config.write("prepared_statements = false\n")
    topology.caught_up()
    return paths


def test_the_six_tools_work_through_pgbouncer_in_transaction_mode(tmp_path: Path, pooled: Topology) -> None:
    paths = pooled_home(tmp_path / "home", pooled, "six_tools")
    issued = bind(paths)
    agent = StdioAgent(paths.home, issued.token)
    try:
        # More runs of each statement than psycopg's threshold for preparing it on the server.
        kept = [remember(agent, f"Release train {n} leaves on Thursday from branch rc-{n}.")[1] for n in range(8)]
        for record_id in kept * 4:
            assert record_id in found_ids(agent, "release train Thursday")
            assert ok_value(get(agent, record_id))["record"]["record_id"] == record_id
        arguments = capture_args("The staging database password rotates monthly.")
        first = ok_value(agent.call(CAPTURE, arguments))
        assert ok_value(agent.call(CAPTURE, arguments))["candidate_id"] == first["candidate_id"]  # replayed
        withdrawn = capture(agent, "A draft about the canteen menu.")
        withdraw_now(agent, paths, withdrawn["candidate_id"])
        forget_now(agent, paths, kept[0])
        assert kept[0] not in found_ids(agent, "release train Thursday")
        assert_failure(get(agent, kept[0]), "NOT_FOUND")
    finally:
        agent.close()
    verified = cli("verify", "--home", str(paths.home), timeout=120)
    assert verified.code == 0, verified.stdout + verified.stderr
    # The standby reports its oldest snapshot (hot_standby_feedback) every second: until it has, VACUUM
    # may not remove the erased rows, and erase says to run it again.
    for _attempt in range(20):
        erased = cli("erase", "--home", str(paths.home), timeout=120)
        if erased.code == 0:
            break
        assert "run erase again" in erased.stderr, erased.stderr
        time.sleep(0.5)
    assert erased.code == 0, erased.stdout + erased.stderr


def test_concurrent_agents_through_the_pooler_share_its_server_connections(tmp_path: Path, pooled: Topology) -> None:
    """Several transactions at once make PgBouncer hand each client's next one to another server
    connection: a statement prepared on one would not exist on the next (prepared_statements = false)."""
    paths = pooled_home(tmp_path / "home", pooled, "concurrent", standby=False)  # searches through the pooler
    issued = bind(paths)
    with open_engine(paths, runtime=True, semantic=False) as engine:
        agent = InProcessAgent(engine, issued.binding)
        record_id = agent.remember("The VPN profile for contractors expires every ninety days.")

        def searches() -> list[bool]:
            return [record_id in _found(agent, "VPN profile contractors") for _ in range(30)]

        with ThreadPoolExecutor(max_workers=4) as pool:
            answers = [found for done in [pool.submit(searches) for _ in range(4)] for found in done.result()]
    assert answers == [True] * 120


def _found(agent: InProcessAgent, query: str) -> list[str]:
    value = agent.value("engram_memory_search", {"query": query, "purpose_ref": PURPOSE})
    return [packet["record"]["record_id"] for packet in value["records"]]
