"""The default profile over MCP stdio: a server with the embedding model ranks hybrid.

The rest of the stdio suite pins the lexical profile to check exact result sets; these tests run the
server as installed (`semantic=True`), on each store, and check what the semantic channel adds and
what it must never do: cross a tenant, or keep a forgotten record findable.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from engram_memory.embeddings.loader import E5
from engram_memory.host.settings import HostPaths
from tests.mcp.helpers import FORGET, HostCli, assert_failure, forget_args, found_ids, ok_value, remember, search
from tests.support.agents import McpAgent, StdioAgent
from tests.support.homes import bind
from tests.support.raw import raw_store

pytestmark = pytest.mark.stdio

PARAPHRASE = "automobile maintenance"


class Site:
    """A home on the store under test; each agent's server (model and all) starts only when a test uses it."""

    def __init__(self, paths: HostPaths) -> None:
        self.paths = paths
        self._agents: dict[str, StdioAgent] = {}

    def _agent(self, name: str, token: str) -> McpAgent:
        if name not in self._agents:
            self._agents[name] = StdioAgent(self.paths.home, token, semantic=True)
        return self._agents[name]

    @property
    def alice(self) -> McpAgent:
        return self._agent("alice", bind(self.paths).token)

    @property
    def alice_elsewhere(self) -> McpAgent:
        """Alice's binding in a second server process: an index of its own on the same store."""
        return self._agent("alice-2", bind(self.paths).token)

    @property
    def other_tenant(self) -> McpAgent:
        return self._agent("bob", bind(self.paths, tenant="tenant-b", principal="bob").token)

    def close(self) -> None:
        for agent in self._agents.values():
            agent.close()


@pytest.fixture
def site(paths: HostPaths) -> Iterator[Site]:
    opened = Site(paths)
    try:
        yield opened
    finally:
        opened.close()


def test_the_default_profile_is_hybrid_and_finds_a_paraphrase(site: Site) -> None:
    _, car = remember(site.alice, "The car needs new tyres before winter.")
    remember(site.alice, "Quarterly invoices are mailed on the first Monday.")
    value = ok_value(search(site.alice, PARAPHRASE))
    receipt = value["rank_receipt"]
    assert receipt["profile"] == "hybrid-convex"
    assert [channel["channel"] for channel in receipt["channels"]] == ["lexical", "semantic"]
    assert receipt["channels"][1]["model"] == E5  # one model reads every language
    assert [packet["record"]["record_id"] for packet in value["records"]][:1] == [car]
    required = ok_value(search(site.alice, PARAPHRASE, capability_policy={"minimum_channels": "lexical_and_semantic"}))
    assert required["rank_receipt"]["ordered_ids_digest"] == receipt["ordered_ids_digest"]


def test_the_semantic_channel_never_crosses_a_tenant(site: Site) -> None:
    remember(site.alice, "The car needs new tyres before winter.")
    assert found_ids(site.other_tenant, PARAPHRASE) == []
    _, own = remember(site.other_tenant, "The truck fleet is serviced every spring.")
    assert found_ids(site.other_tenant, PARAPHRASE) == [own]


def test_a_forgotten_record_leaves_the_semantic_channel(site: Site) -> None:
    _, car = remember(site.alice, "The car needs new tyres before winter.")
    _, other = remember(site.alice, "Quarterly invoices are mailed on the first Monday.")
    assert found_ids(site.alice, "quarterly invoices") == [other]
    assert found_ids(site.alice, PARAPHRASE)[:1] == [car]
    arguments = forget_args(car)
    assert_failure(site.alice.call(FORGET, arguments), "gate_failed")
    host = HostCli(site.paths)
    host.approve(host.only_request(car)["id"])
    ok_value(site.alice.call(FORGET, arguments))
    assert found_ids(site.alice, PARAPHRASE) == []  # the invoices note is about nothing the query asks
    with raw_store(site.paths) as db:
        assert db.rows("SELECT r.record_id FROM record_vectors AS v JOIN records AS r ON r.rid = v.rid") == [(other,)]


def test_two_server_processes_follow_each_other_s_writes_and_forgets(site: Site) -> None:
    """Each `serve` process keeps its own index; each catches up by what the other wrote."""
    remember(site.alice, "Quarterly invoices are mailed on the first Monday.")
    assert found_ids(site.alice_elsewhere, PARAPHRASE) == []  # the second index is built; invoices are off-topic
    _, car = remember(site.alice, "The car needs new tyres before winter.")
    assert found_ids(site.alice_elsewhere, PARAPHRASE)[:1] == [car]
    first, second = search(site.alice, PARAPHRASE), search(site.alice_elsewhere, PARAPHRASE)
    assert (
        ok_value(first)["rank_receipt"]["ordered_ids_digest"] == ok_value(second)["rank_receipt"]["ordered_ids_digest"]
    )
    arguments = forget_args(car)
    assert_failure(site.alice_elsewhere.call(FORGET, arguments), "gate_failed")
    host = HostCli(site.paths)
    host.approve(host.only_request(car)["id"])
    ok_value(site.alice_elsewhere.call(FORGET, arguments))
    assert found_ids(site.alice, PARAPHRASE) == found_ids(site.alice_elsewhere, PARAPHRASE) == []
