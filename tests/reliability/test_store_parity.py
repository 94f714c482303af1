"""The same call gets the same answer on both stores (issue 14): differential fuzzing, SQLite against PostgreSQL.

Two homes, one per store, start alike (one record, one pending candidate); then both get the same
stream of fuzzed tool calls (valid arguments mutated field by field, as the stdio fuzzer makes them),
in the same order, each id of the starting record or candidate standing for that home's own. Every
answer must agree: success or the same error code (and whether it is retriable), or the same protocol
fault. A store-specific failure (a driver error on a byte one store refuses, a limit one store hits)
shows up here as a disagreement.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engram_memory.contract.binding import Binding
from engram_memory.contract.errors import ProtocolFault
from engram_memory.engine.engine import Engine
from engram_memory.host.compose import open_engine
from tests.reliability.scale import amount, report
from tests.reliability.test_fuzz_stdio import _tool_arguments
from tests.support.homes import bind, home_on
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE

SEED = 1423
RECORD, CANDIDATE = "mem_" + "r" * 26, "cand_" + "c" * 26  # placeholders for each home's own ids


@dataclass(frozen=True)
class Home:
    agents: Engine
    binding: Binding
    ids: dict[str, str]


def _own_ids(value: Any, ids: dict[str, str]) -> Any:
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, list):
        return [_own_ids(item, ids) for item in value]
    if isinstance(value, dict):
        return {key: _own_ids(item, ids) for key, item in value.items()}
    return value


def _answer(home: Home, tool: str, arguments: Any) -> tuple[Any, ...]:
    try:
        envelope = home.agents.handle(home.binding, tool, _own_ids(arguments, home.ids))
    except ProtocolFault as fault:
        return ("protocol", fault.code)
    if envelope["ok"]:
        return ("ok",)
    return ("error", envelope["error"]["code"], envelope["error"].get("retriable"))


@pytest.fixture
def homes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[Home]]:
    with ExitStack() as stack:
        made = []
        for store in ("sqlite", "postgres"):
            paths = stack.enter_context(home_on(store, tmp_path / store, request))
            agents = stack.enter_context(open_engine(paths, runtime=store == "postgres"))
            binding = bind(paths).binding
            agent = InProcessAgent(agents, binding)
            ids = {RECORD: agent.remember("Parity starts from one record."), CANDIDATE: agent.capture("And one draft.")}
            ids[CANDIDATE] = str(ids[CANDIDATE]["candidate_id"])  # type: ignore[index]
            made.append(Home(agents, binding, ids))
        yield made


def _wide_search(rng: random.Random) -> tuple[str, dict[str, Any]]:
    """A query of up to thousands of distinct words in four scripts: where one store's query planner
    or parameter limit would give out first."""
    syllables = ["ka", "ri", "mo", "배", "포", "部", "署", "デ", "プ", "λ"]
    words = {"".join(rng.choices(syllables, k=rng.randint(1, 4))) + str(n) for n in range(rng.randint(1, 3_000))}
    return "engram_memory_search", {"query": " ".join(words), "purpose_ref": PURPOSE, "limit": rng.randint(1, 50)}


def test_fuzzed_calls_get_the_same_answer_on_sqlite_and_postgresql(homes: list[Home]) -> None:
    rng = random.Random(SEED)
    calls = amount(300, 10_000)
    kinds: Counter[str] = Counter()
    disagreements: list[tuple[str, Any, tuple[Any, ...], tuple[Any, ...]]] = []
    for _ in range(calls):
        tool, arguments = _wide_search(rng) if rng.random() < 0.05 else _tool_arguments(rng, RECORD, CANDIDATE)
        sqlite, postgres = (_answer(home, tool, arguments) for home in homes)
        kinds[str(sqlite[-2] if sqlite[0] == "error" else sqlite[0])] += 1
        if sqlite != postgres:
            disagreements.append((tool, arguments, sqlite, postgres))
    assert disagreements == [], [(tool, repr(args)[:300], a, b) for tool, args, a, b in disagreements[:10]]
    assert kinds["ok"] and len(kinds) > 3, kinds  # the stream reaches success and several refusals
    answers = ", ".join(f"{kind}: {count}" for kind, count in kinds.most_common())
    report("fuzzed calls answered alike on SQLite and PostgreSQL", calls, target="every one", unit=f"({answers})")
