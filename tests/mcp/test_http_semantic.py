"""The default (hybrid) profile behind several `serve --http` processes on one store, as a team deploys it.

Each process keeps its own semantic index of the workspace and catches it up by what the store says
changed. An agent's calls go to whichever process its client reaches: what it admitted through one
must be found at its next search through any other, and what it forgot through one must be gone from
every other's next answer. The questions share no word with the notes they are about (another
language), so only the semantic channel can find them: a process whose index missed a write would not.
Runs once per store.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from engram_memory.host.settings import HostPaths
from tests.mcp.helpers import FORGET, HostCli, assert_failure, forget_args, ok_value, remember, search
from tests.support.homes import bind
from tests.support.http_agents import HttpAgent, HttpServer

pytestmark = pytest.mark.stdio

PROCESSES = 3
# (note, a question about it in another language)
NOTES = [
    ("새 서비스는 PostgreSQL 데이터베이스를 사용해야 합니다.", "Which database should new services use?"),
    ("The Terraform state file is kept in the shared storage bucket.", "테라폼 상태 파일은 어디에 저장해?"),
    ("每周五下午部署到生产环境。", "When do we deploy to production?"),
    ("The on-call rotation changes every Monday morning.", "当番のローテーションはいつ交代しますか?"),
]


@pytest.fixture
def agents(paths: HostPaths, tmp_path: Path) -> Iterator[list[HttpAgent]]:
    """One agent's binding, one client per `serve --http` process."""
    token = bind(paths).token
    with ExitStack() as stack:
        servers = [
            stack.enter_context(HttpServer(paths.home, tmp_path / f"serve-{n}.log", semantic=True))
            for n in range(PROCESSES)
        ]
        yield [stack.enter_context(HttpAgent(server.url, token)) for server in servers]


def _found(agent: HttpAgent, query: str) -> list[str]:
    return [packet["record"]["record_id"] for packet in ok_value(search(agent, query))["records"]]


def test_an_admitted_memory_is_found_through_every_process_at_the_next_search(
    agents: list[HttpAgent], paths: HostPaths
) -> None:
    for agent in agents:  # every process has built its index of the (empty) workspace
        assert _found(agent, "anything at all") == []
    held: list[str] = []
    for n, (note, question) in enumerate(NOTES):
        _, record_id = remember(agents[n % PROCESSES], note)
        held.append(record_id)
        for agent in agents:
            assert record_id in _found(agent, question)
    digests = {ok_value(search(agent, NOTES[0][1]))["rank_receipt"]["ordered_ids_digest"] for agent in agents}
    assert len(digests) == 1  # the same state ranks the same through every process

    forgotten = held[0]
    arguments = forget_args(forgotten)
    assert_failure(agents[1].call(FORGET, arguments), "gate_failed")
    host = HostCli(paths)
    host.approve(host.only_request(forgotten)["id"])
    ok_value(agents[1].call(FORGET, arguments))
    for agent in agents:
        found = _found(agent, NOTES[0][1])
        assert forgotten not in found
        assert set(found) <= set(held[1:])
