"""The edge's group commit on a real engine: calls queued behind a running one share the next group, a
lone call runs alone, and a caller that leaves does not strand the calls queued behind it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import pytest

from engram_memory.engine.engine import AgentCall, Engine
from engram_memory.host.settings import HostPaths
from engram_memory.mcp.grouping import GROUP_LIMIT, CallGroups
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.homes import bind
from tests.support.payloads import capture_args
from tests.support.raw import raw_store

CAPTURE = "engram_memory_capture"


@pytest.fixture
def engine(sqlite_paths: HostPaths) -> Iterator[Engine]:
    with steered_engine(sqlite_paths, clock=ManualClock(), semantic=False) as running:
        yield running


def _sized(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every group the engine is handed (instrumentation only: each group still runs)."""
    sizes: list[int] = []
    original = engine.handle_group

    def recorded(calls: Sequence[AgentCall]) -> list[Any]:
        sizes.append(len(calls))
        return original(calls)

    monkeypatch.setattr(engine, "handle_group", recorded)
    return sizes


def _calls(paths: HostPaths, count: int, prefix: str) -> list[AgentCall]:
    binding = bind(paths).binding
    return [
        AgentCall(binding, CAPTURE, capture_args(f"{prefix} note {n} on the rota.", key=f"{prefix}-capture-{n:04d}"))
        for n in range(count)
    ]


def test_a_lone_call_runs_alone(sqlite_paths: HostPaths, engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = _sized(engine, monkeypatch)
    groups = CallGroups(engine)

    async def one_at_a_time() -> list[dict[str, Any]]:
        return [await groups.answer(call) for call in _calls(sqlite_paths, 3, "lone")]

    envelopes = anyio.run(one_at_a_time)
    assert sizes == [1, 1, 1]
    assert all(envelope["ok"] for envelope in envelopes)


def test_calls_queued_behind_a_running_one_share_the_next_group(
    sqlite_paths: HostPaths, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizes = _sized(engine, monkeypatch)
    groups = CallGroups(engine)
    calls = _calls(sqlite_paths, GROUP_LIMIT + 20, "queued")
    answers: dict[int, dict[str, Any]] = {}

    async def all_at_once() -> None:
        async def send(n: int) -> None:
            answers[n] = await groups.answer(calls[n])

        async with anyio.create_task_group() as group:
            for n in range(len(calls)):
                group.start_soon(send, n)

    anyio.run(all_at_once)
    assert sum(sizes) == len(calls) and max(sizes) == GROUP_LIMIT and sizes[0] == 1
    assert all(answers[n]["ok"] for n in range(len(calls)))
    with raw_store(sqlite_paths) as db:
        assert db.count("candidates") == len(calls)


def test_a_caller_that_leaves_does_not_strand_the_calls_behind_it(sqlite_paths: HostPaths, engine: Engine) -> None:
    """Call 0 finds the engine idle and drains the queue; its caller is cancelled while the calls behind
    it wait. They are all answered, and call 0 is committed though nobody is left to hear it."""
    groups = CallGroups(engine)
    calls = _calls(sqlite_paths, 6, "left")
    answers: dict[int, dict[str, Any]] = {}
    cancelled: list[bool] = []

    async def first_caller_leaves() -> None:
        first = anyio.CancelScope()

        async def send(n: int) -> None:
            answers[n] = await groups.answer(calls[n])

        async def send_first() -> None:
            with first:
                await send(0)

        async with anyio.create_task_group() as group:
            group.start_soon(send_first)
            await anyio.sleep(0)
            for n in range(1, len(calls)):
                group.start_soon(send, n)
            await anyio.sleep(0)
            first.cancel()
        cancelled.append(first.cancelled_caught)

    anyio.run(first_caller_leaves)
    assert cancelled == [True]
    assert sorted(answers) == list(range(1, len(calls)))
    with raw_store(sqlite_paths) as db:
        assert db.count("candidates") == len(calls)
