"""A standby promoted while agents write: nothing acknowledged is lost, nothing is done twice.

The primary waits for its synchronous standby before acknowledging a commit; the home names both
nodes in one libpq URL with target_session_attrs=read-write, so the store's pools reconnect to
whichever node accepts writes. Writers retry each failed call with the same idempotency key, as the
contract tells agents to do with a retriable error.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engram_memory.host.compose import init_home, open_engine
from engram_memory.host.settings import HostPaths
from tests.host.clirun import cli
from tests.mcp.helpers import db_count
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE, capture_args, unique_key
from tests.support.postgres import APP_ROLE, OWNER_ROLE
from tests.support.topology import Node, Topology

pytestmark = pytest.mark.slow

RETRIABLE = {"STORE_UNAVAILABLE", "MUTATION_OUTCOME_UNKNOWN"}
WRITERS = 4


def either_node(nodes: list[Node], database: str) -> str:
    """One URL naming every node: libpq connects to the first that accepts writes."""
    hosts = ",".join(str(node.socket_dir) for node in nodes)
    ports = ",".join(str(node.port) for node in nodes)
    return f"postgresql://{OWNER_ROLE}@/{database}?host={hosts}&port={ports}&target_session_attrs=read-write"


def failover_home(folder: Path, topology: Topology) -> HostPaths:
    nodes = [topology.primary, *topology.standbys]
    store, keys = topology.new_database("failover"), topology.new_database("failover_keys")
    paths = HostPaths(home=folder)
    init_home(paths, either_node(nodes, store), app_role=APP_ROLE, vault=either_node(nodes, keys))
    return paths


def _until_acknowledged(
    agent: InProcessAgent, tool: str, arguments: dict[str, Any], deadline: float, retried: list[str]
) -> dict[str, Any]:
    while True:
        envelope = agent.call(tool, arguments)
        if envelope["ok"]:
            value: dict[str, Any] = envelope["output"]["value"]
            return value
        assert envelope["error"]["code"] in RETRIABLE, envelope
        retried.append(envelope["error"]["code"])
        assert time.monotonic() < deadline, "writes did not come back"
        time.sleep(0.05)


def test_promoting_the_synchronous_standby_loses_no_acknowledged_mutation(tmp_path: Path) -> None:
    with Topology.built(standbys=1, synchronous=True) as topology:
        paths = failover_home(tmp_path / "home", topology)
        issued = bind(paths)
        acknowledged: list[str] = []
        retried: list[str] = []
        stop = threading.Event()
        lock = threading.Lock()
        with open_engine(paths, runtime=True, semantic=False) as engine:
            agent = InProcessAgent(engine, issued.binding)

            def write(writer: int) -> None:
                n = 0
                while not stop.is_set():
                    n += 1
                    deadline = time.monotonic() + 90
                    text = f"Writer {writer} note {n}: the build cache lives on volume v{writer}-{n}."
                    captured = _until_acknowledged(
                        agent, "engram_memory_capture", capture_args(text), deadline, retried
                    )
                    admission = {"candidate_id": captured["candidate_id"], "idempotency_key": unique_key("admit")}
                    outcome = _until_acknowledged(
                        agent, "engram_memory_request_admission", admission, deadline, retried
                    )
                    assert outcome["outcome"]["status"] == "accepted", outcome
                    with lock:
                        acknowledged.append(outcome["outcome"]["record_id"])

            threads = [threading.Thread(target=write, args=(number,)) for number in range(WRITERS)]
            for thread in threads:
                thread.start()
            while len(acknowledged) < 40:
                time.sleep(0.05)
            with topology.primary.connect() as db:
                assert db.execute("SELECT sync_state FROM pg_stat_replication").fetchall() == [("sync",)]
            topology.primary.crash()
            topology.standbys[0].promote()
            before = len(acknowledged)
            deadline = time.monotonic() + 90
            while len(acknowledged) < before + 40 and time.monotonic() < deadline:
                time.sleep(0.05)
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
            assert len(acknowledged) >= before + 40, "writes did not resume on the promoted standby"
            lost = [
                record_id
                for record_id in acknowledged
                if not agent.call("engram_memory_get", {"record_id": record_id, "purpose_ref": PURPOSE})["ok"]
            ]
        assert lost == []
        assert retried, "the writers never saw the failover"
        assert len(set(acknowledged)) == len(acknowledged)
        # At most once: one candidate and one record per note, though calls were retried.
        assert db_count(paths, "candidates") == len(acknowledged)
        assert db_count(paths, "records") == len(acknowledged)
        verified = cli("verify", "--home", str(paths.home), timeout=120)
        assert verified.code == 0, verified.stdout + verified.stderr
