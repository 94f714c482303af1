"""Tenants across clusters on one PostgreSQL server (a database stands for each cluster): routing a call
to its tenant's cluster, grouped calls split by cluster, and a move there and back. The move under load,
between two real servers, is tests/topology/test_tenant_move.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_memory.engine.engine import AgentCall
from engram_memory.host.compose import open_engine, serving_engines
from engram_memory.host.settings import HostPaths
from engram_memory.host.tenant_move import MoveRefused, move_tenant
from engram_memory.host.tenant_routes import Cluster, TenantRoutes, read_routes, write_routes
from tests.host.clirun import cli
from tests.support.homes import bind
from tests.support.payloads import PURPOSE, capture_args, unique_key
from tests.support.postgres import PostgresCluster, owner_url

CAPTURE, ADMIT, GET = "engram_memory_capture", "engram_memory_request_admission", "engram_memory_get"


@pytest.fixture
def two_clusters(postgres_paths: HostPaths, postgres_cluster: PostgresCluster) -> Iterator[HostPaths]:
    east = postgres_cluster.new_database("engram_east")
    write_routes(postgres_paths, TenantRoutes({"east": Cluster(store=owner_url(postgres_cluster, east))}, {}))
    yield postgres_paths
    postgres_cluster.retire_database(east)


def _remember(agents: object, binding: object, text: str) -> str:
    handle = agents.handle  # type: ignore[attr-defined]
    captured = handle(binding, CAPTURE, capture_args(text))["output"]["value"]
    admission = {"candidate_id": captured["candidate_id"], "idempotency_key": unique_key("admit")}
    return str(handle(binding, ADMIT, admission)["output"]["value"]["outcome"]["record_id"])


def test_a_tenant_moves_there_and_back_and_calls_follow_it(two_clusters: HostPaths, tmp_path: Path) -> None:
    paths = two_clusters
    ann = bind(paths, tenant="acme", principal="ann").binding
    bob = bind(paths, tenant="beta", principal="bob").binding
    with serving_engines(paths) as serving:
        agents = serving.agents
        kept = _remember(agents, ann, "The acme release train leaves on Thursdays.")
        moved = move_tenant(paths, "acme", "east")
        assert (moved.source, moved.target, moved.copied["records"]) == ("home", "east", 1)
        assert read_routes(paths).cluster_of("acme") == "east"
        read = agents.handle(ann, GET, {"record_id": kept, "purpose_ref": PURPOSE})
        assert read["ok"], read  # answered from east, which now holds it
        grouped = agents.handle_group(
            [
                AgentCall(bob, CAPTURE, capture_args("A beta note.")),
                AgentCall(ann, CAPTURE, capture_args("An acme one.")),
            ]
        )
        assert [outcome["ok"] for outcome in grouped] == [True, True]  # type: ignore[index]
        with pytest.raises(MoveRefused, match="already lives in cluster 'east'"):
            move_tenant(paths, "acme", "east")
        back = move_tenant(paths, "acme", "home")  # the home's fence is lifted by the copy coming back
        assert back.copied["candidates"] == 2
        assert agents.handle(ann, GET, {"record_id": kept, "purpose_ref": PURPOSE})["ok"]
        _remember(agents, ann, "Acme writes at home again.")
    with open_engine(paths, cluster="east", semantic=False) as east:
        assert east.verify(full=True).first is None
    assert cli("verify", "--home", str(paths.home), timeout=120).code == 0
    listed = cli("tenants", "list", "--home", str(paths.home))
    assert listed.code == 0 and "east: none" in listed.stdout


def test_a_move_is_refused_in_one_line_when_there_is_nothing_or_nowhere_to_go(two_clusters: HostPaths) -> None:
    nothing = cli("tenants", "move", "nobody", "--to", "east", "--home", str(two_clusters.home))
    assert nothing.code == 1 and "holds nothing of tenant 'nobody'" in nothing.stderr
    nowhere = cli("tenants", "move", "acme", "--to", "west", "--home", str(two_clusters.home))
    assert nowhere.code == 1 and "no cluster 'west'" in nowhere.stderr
