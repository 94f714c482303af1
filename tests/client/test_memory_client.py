"""`MemoryClient` against the real server over MCP stdio, on both stores: what an agent built on the SDK
gets from `remember`, `search` and `get`, in four languages, and how a retry after a dropped call ends."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from engram_memory.client import EngramError, MemoryClient
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from mcp import Client, StdioServerParameters
from tests.support.agents import LEXICAL_ONLY
from tests.support.homes import STORES, bind, engine_for, home_on
from tests.support.payloads import PURPOSE

pytestmark = pytest.mark.stdio


@pytest.fixture(scope="module", params=STORES)
def home(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostPaths]:
    with home_on(str(request.param), tmp_path_factory.mktemp("client") / "home", request) as paths:
        yield paths


def _run(home: HostPaths, workspace: str, scenario: Callable[[Client], Awaitable[None]]) -> None:
    token = bind(home, workspace=workspace).token
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "engram_memory", "serve", "--home", str(home.home)],
        env={**LEXICAL_ONLY, "ENGRAM_BINDING": token},
    )

    async def main() -> None:
        async with Client(params, read_timeout_seconds=60) as client:
            await scenario(client)

    anyio.run(main)


TEXTS = {
    "en": "Release trains leave every second Tuesday; hotfixes need a reviewer.",
    "ko": "배포 열차는 격주 화요일에 출발하며 핫픽스는 리뷰어 승인이 필요하다.",
    "zh": "发布列车每隔一个星期二出发，热修复需要评审者批准。",
    "ja": "リリース列車は隔週火曜日に出発し、ホットフィックスにはレビュアーの承認が必要です。",
}


def test_remember_then_search_and_get_in_four_languages(home: HostPaths) -> None:
    async def scenario(client: Client) -> None:
        memory = await MemoryClient.discover(client)
        assert memory.purpose_ref == PURPOSE
        records = {}
        for language, text in TEXTS.items():
            remembered = await memory.remember(text, source=f"wiki:release-{language}", kind="decision")
            assert remembered.status == "accepted" and remembered.record_id is not None
            records[language] = remembered.record_id
        for language, query in {
            "en": "hotfixes reviewer",
            "ko": "핫픽스",
            "zh": "热修复",
            "ja": "ホットフィックス",
        }.items():
            hits = await memory.search(query, limit=3)
            assert hits and hits[0].record_id == records[language], (language, hits)
            assert hits[0].text == TEXTS[language] and hits[0].source_ref == f"wiki:release-{language}"
        got = await memory.get(records["ko"])
        assert got is not None and got.text == TEXTS["ko"]
        assert await memory.get("mem_" + "a" * 26) is None

    _run(home, "client-languages", scenario)


class _DropsTheFirstAdmission:
    """A session whose first admission call is lost on the way (injected: a dropped connection cannot be
    timed between two calls of one real stdio session)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.dropped = False
        self.captures: list[dict[str, Any]] = []

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        if name == "engram_memory_capture":
            self.captures.append(dict(arguments or {}))
        if name == "engram_memory_request_admission" and not self.dropped:
            self.dropped = True
            raise ConnectionError("injected: the connection dropped")
        return await self.client.call_tool(name, arguments)


def test_a_remember_retried_after_a_dropped_call_stores_one_candidate_and_one_record(home: HostPaths) -> None:
    async def scenario(client: Client) -> None:
        session = _DropsTheFirstAdmission(client)
        memory = MemoryClient(session, PURPOSE, now_ms=lambda: 1_700_000_000_000)
        text = "The on-call rota swaps on Mondays at 09:00 local time."
        with pytest.raises(ConnectionError):
            await memory.remember(text, source="wiki:on-call")
        again = await memory.remember(text, source="wiki:on-call")
        assert again.status == "accepted"
        assert session.captures[0] == session.captures[1]  # the identical capture, same key: replayed
        later = await memory.remember(text, source="wiki:on-call")  # a new remember of the same fact
        assert (later.status, later.record_id) == ("duplicate_exact", again.record_id)
        assert [hit.record_id for hit in await memory.search("on-call rota Mondays")] == [again.record_id]

    _run(home, "client-retry", scenario)


def test_a_refused_remember_names_the_field_and_sends_nothing_else(home: HostPaths) -> None:
    async def scenario(client: Client) -> None:
        memory = MemoryClient(client, PURPOSE)
        with pytest.raises(EngramError) as refused:
            await memory.remember("A fact with a source reference that is far too long.", source="s" * 600)
        assert (refused.value.code, refused.value.retriable) == ("INVALID_SCHEMA", False)
        assert refused.value.pointer == "/evidence/evidence_ref"  # the source is cited there too, less deep
        with pytest.raises(ValueError, match="kind"):
            await memory.remember("x", source="wiki:x", kind="opinion")
        assert await memory.search("far too long") == []

    _run(home, "client-refused", scenario)


def test_the_package_has_nothing_of_the_server(tmp_path: Path) -> None:
    import subprocess

    code = (
        "import sys, engram_memory.client; "
        "print(sorted({m.split('.')[1] for m in sys.modules if m.startswith('engram_memory.')}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert done.stdout.strip() == "['client']"


def test_remember_reports_what_a_family_superseded(home: HostPaths) -> None:
    policy = DEFAULT_POLICY_TOML.replace("consented_families = []", 'consented_families = ["fact:*"]')
    home.policy.write_text(policy + '\n[[family_rules]]\npattern = "fact:*"\nmode = "supersede"\n', encoding="utf-8")

    async def scenario(client: Client) -> None:
        memory = await MemoryClient.discover(client)
        old = await memory.remember(
            "The client-test deploy window is Tuesday.", source="wiki:deploy", family_refs=["fact:client-deploy"]
        )
        new = await memory.remember(
            "The client-test deploy window is Thursday.",
            source="wiki:deploy",
            family_refs=["fact:client-deploy"],
        )
        assert old.superseded == () and new.superseded == (old.record_id,)
        found = [m.record_id for m in await memory.search("client-test deploy window")]
        assert found == [new.record_id]

    _run(home, "workspace-families", scenario)


def test_remember_again_learns_what_a_person_decided(home: HostPaths) -> None:
    home.policy.write_text(DEFAULT_POLICY_TOML.replace('mode = "auto"', 'mode = "review"'), encoding="utf-8")
    text = "The client-test vendor portal is reviewed every quarter."

    async def held(client: Client) -> None:
        memory = MemoryClient(client, PURPOSE)
        first = await memory.remember(text, source="wiki:vendors")
        assert (first.status, first.reasons) == ("pending_adjudication", ("policy:review_all",))
        with engine_for(home) as engine:
            engine.accept_candidate(first.candidate_id, decided_by="host:test")
        again = await memory.remember(text, source="wiki:vendors")  # the same calls: the person's answer
        assert (again.candidate_id, again.status) == (first.candidate_id, "accepted") and again.record_id

    try:
        _run(home, "client-review", held)
    finally:
        home.policy.write_text(DEFAULT_POLICY_TOML, encoding="utf-8")
