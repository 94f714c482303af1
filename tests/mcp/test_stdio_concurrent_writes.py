"""Many writes in flight on one stdio session (an agent's parallel tool calls): the server groups them
into shared commits, and every call still gets exactly the answer it would get alone."""

from __future__ import annotations

import sys
from typing import Any

import anyio

from engram_memory.host.settings import HostPaths
from mcp import Client, StdioServerParameters
from tests.support.agents import LEXICAL_ONLY
from tests.support.homes import bind
from tests.support.payloads import PURPOSE, capture_args
from tests.support.raw import raw_store

IN_FLIGHT = 8
PAIRS = 48


def _params(paths: HostPaths, token: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "engram_memory", "serve", "--home", str(paths.home)],
        env={**LEXICAL_ONLY, "ENGRAM_BINDING": token},
    )


async def _concurrent_pairs(params: StdioServerParameters) -> dict[str, Any]:
    captured: dict[int, dict[str, Any]] = {}
    admitted: dict[int, dict[str, Any]] = {}
    replays: list[dict[str, Any]] = []
    async with Client(params) as client:

        async def envelope(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(tool, arguments)
            assert isinstance(result.structured_content, dict)
            return result.structured_content

        async def pair(n: int) -> None:
            arguments = capture_args(
                f"Parallel note {n}: crate {n} goes to bay {n % 7}.", key=f"parallel-capture-{n:04d}"
            )
            captured[n] = await envelope("engram_memory_capture", arguments)
            candidate = captured[n]["output"]["value"]["candidate_id"]
            admission = {"candidate_id": candidate, "idempotency_key": f"parallel-admit-{n:04d}"}
            admitted[n] = await envelope("engram_memory_request_admission", admission)

        async def agent(first: int) -> None:
            for n in range(first, PAIRS, IN_FLIGHT):
                await pair(n)

        async def replay(n: int) -> None:
            arguments = capture_args("One note sent twice at once.", key="parallel-replay-0001")
            replays.append(await envelope("engram_memory_capture", arguments))

        async with anyio.create_task_group() as group:
            for first in range(IN_FLIGHT):
                group.start_soon(agent, first)
            group.start_soon(replay, 0)
            group.start_soon(replay, 1)
        found = await envelope("engram_memory_search", {"query": "crate 41 bay 6", "purpose_ref": PURPOSE})
    return {"captured": captured, "admitted": admitted, "replays": replays, "found": found}


def test_parallel_writes_on_one_session_are_each_answered_and_durable(shared_home: HostPaths) -> None:
    token = bind(shared_home, workspace="workspace-parallel", session="session-parallel").token
    outcome = anyio.run(_concurrent_pairs, _params(shared_home, token))
    admitted = outcome["admitted"]
    assert sorted(admitted) == list(range(PAIRS))
    statuses = {envelope["output"]["value"]["outcome"]["status"] for envelope in admitted.values()}
    assert statuses == {"accepted"}
    records = {envelope["output"]["value"]["outcome"]["record_id"] for envelope in admitted.values()}
    assert len(records) == PAIRS
    audit_ids = [envelope["auditId"] for envelope in [*outcome["captured"].values(), *admitted.values()]]
    assert len(set(audit_ids)) == 2 * PAIRS
    first, again = outcome["replays"]
    assert first["output"]["value"]["candidate_id"] == again["output"]["value"]["candidate_id"]
    found = [packet["record"]["record_id"] for packet in outcome["found"]["output"]["value"]["records"]]
    assert admitted[41]["output"]["value"]["outcome"]["record_id"] == found[0]
    with raw_store(shared_home) as db:
        assert db.count("records", "workspace = 'workspace-parallel'") == PAIRS
