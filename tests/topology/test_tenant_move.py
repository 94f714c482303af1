"""A tenant moved to a second PostgreSQL cluster while its agents write: nothing acknowledged is lost,
the target verifies, the source keeps nothing of it, and another tenant is untouched."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engram_memory.host.compose import init_home, open_engine, serving_engines
from engram_memory.host.settings import HostPaths
from engram_memory.host.tenant_routes import Cluster, TenantRoutes, write_routes
from tests.host.clirun import cli
from tests.support.failover import RETRIABLE
from tests.support.homes import bind
from tests.support.payloads import PURPOSE, capture_args, unique_key
from tests.support.postgres import APP_ROLE, OWNER_ROLE
from tests.support.topology import Topology

pytestmark = pytest.mark.slow


def two_cluster_home(folder: Path, west: Topology, east: Topology) -> HostPaths:
    """A home on the west cluster whose tenants.toml also names the east one (its database still empty)."""
    paths = HostPaths(home=folder)
    store, keys = west.new_database("moving"), west.new_database("moving_keys")
    init_home(paths, west.primary.url(OWNER_ROLE, store), app_role=APP_ROLE, vault=west.primary.url(OWNER_ROLE, keys))
    east_store = east.new_database("moving")
    write_routes(paths, TenantRoutes({"east": Cluster(store=east.primary.url(OWNER_ROLE, east_store))}, {}))
    return paths


def _acknowledged(agents: Any, binding: Any, tool: str, arguments: dict[str, Any], retried: list[str]) -> Any:
    deadline = time.monotonic() + 60
    while True:
        envelope = agents.handle(binding, tool, arguments)
        if envelope["ok"]:
            return envelope["output"]["value"]
        assert envelope["error"]["code"] in RETRIABLE, envelope
        retried.append(envelope["error"]["code"])
        assert time.monotonic() < deadline, "writes did not come back"
        time.sleep(0.02)


def test_a_tenant_moves_to_another_cluster_under_load_and_loses_nothing(tmp_path: Path) -> None:
    with Topology.built(standbys=0) as west, Topology.built(standbys=0) as east:
        paths = two_cluster_home(tmp_path / "home", west, east)
        acme = bind(paths, tenant="acme", principal="ann").binding
        beta = bind(paths, tenant="beta", principal="bob").binding
        written: dict[str, list[str]] = {"acme": [], "beta": []}
        retried: list[str] = []
        stop = threading.Event()
        with serving_engines(paths) as serving:
            agents = serving.agents

            def write(name: str, binding: Any, writer: int) -> None:
                n = 0
                while not stop.is_set():
                    n += 1
                    text = f"{name} writer {writer} note {n}: the staging cluster is rebuilt on Fridays."
                    captured = _acknowledged(agents, binding, "engram_memory_capture", capture_args(text), retried)
                    admission = {"candidate_id": captured["candidate_id"], "idempotency_key": unique_key("admit")}
                    outcome = _acknowledged(agents, binding, "engram_memory_request_admission", admission, retried)
                    written[name].append(outcome["outcome"]["record_id"])

            threads = [
                threading.Thread(target=write, args=("acme", acme, 1)),
                threading.Thread(target=write, args=("acme", acme, 2)),
                threading.Thread(target=write, args=("beta", beta, 3)),
            ]
            for thread in threads:
                thread.start()
            while len(written["acme"]) < 30:
                time.sleep(0.02)
            moved = cli("tenants", "move", "acme", "--to", "east", "--home", str(paths.home), timeout=120)
            before = len(written["acme"])
            while len(written["acme"]) < before + 30:
                time.sleep(0.02)
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
            assert moved.code == 0, moved.stderr
            lost = {
                name: [
                    record_id
                    for record_id in ids
                    if not agents.handle(
                        binding, "engram_memory_get", {"record_id": record_id, "purpose_ref": PURPOSE}
                    )["ok"]
                ]
                for name, ids, binding in (("acme", written["acme"], acme), ("beta", written["beta"], beta))
            }
        assert lost == {"acme": [], "beta": []}
        assert len(set(written["acme"])) == len(written["acme"])
        assert retried, "the move never held a write"
        with west.primary.connect("moving", OWNER_ROLE) as db:
            assert db.execute("SELECT count(*) FROM records WHERE tenant = 'acme'").fetchone() == (0,)
            assert db.execute("SELECT count(*) FROM records WHERE tenant = 'beta'").fetchone() == (
                len(written["beta"]),
            )
        with east.primary.connect("moving", OWNER_ROLE) as db:
            assert db.execute("SELECT count(*) FROM records WHERE tenant = 'acme'").fetchone() == (
                len(written["acme"]),
            )
        with open_engine(paths, cluster="east", semantic=False) as engine:
            assert engine.verify(full=True).first is None
        verified = cli("verify", "--home", str(paths.home), timeout=120)
        assert verified.code == 0, verified.stdout + verified.stderr
        listed = cli("tenants", "list", "--home", str(paths.home))
        assert "east: acme" in listed.stdout
