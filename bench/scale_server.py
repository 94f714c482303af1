"""The server as deployed, for bench/scale.py: `engram-memory serve --http` processes on the store, agent
calls answered as the runtime role on PostgreSQL, driven by the SDK's own client over streamable HTTP.

* **search over HTTP**: one agent searching a stored workspace, one call at a time (p50/p95/p99);
* **aggregate writes**: `clients` agents, each on a tenant of its own, spread round-robin over
  `processes` servers, each sending capture+admission pairs one call at a time for `seconds`; the
  acknowledged pairs per second of all of them together. The agents use the lean client of raw_mcp.py
  by default (the SDK's client costs about 1.2 ms of CPU a call, taken from the same two cores as the
  servers'), or the SDK's with `load_client="sdk"`. Afterwards, in the bench's own engine, every
  acknowledged capture and admission is replayed (its key answers `duplicate_exact` / `replayed`, with
  the ids the server gave), each tenant holds exactly its acknowledged candidates, and `verify` (full)
  must find nothing wrong;
* **forget storm**: the search agent again, while a second agent on another server forgets records of
  the same workspace one after another, each approved by the host (the bench's engine) in between, as
  a human would with `confirmations approve`; forget p95 is the executing call's, and the ratio is the
  storm's search p95 over the quiet one.
"""

from __future__ import annotations

import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from engram_memory.engine.verify import verify_store
from engram_memory.host.compose import open_engine, store_settings
from engram_memory.host.settings import HostPaths
from harness import RUN, bench_issued
from mcp import Client
from raw_mcp import RawToolClient

_ANNOUNCED = re.compile(r"serving MCP over streamable HTTP at (http://\S+)")
START_TIMEOUT_S = 1800.0  # serve verifies the store before it listens: minutes at a million memories
REASON = "reason:bench-forget-storm"


@dataclass
class Servers:
    urls: list[str]
    pids: list[int]

    def peak_rss_mb(self) -> float | None:
        """The largest peak resident set (VmHWM) among the servers so far, or None where /proc has none."""
        peaks: list[float] = []
        for pid in self.pids:
            try:
                status = Path(f"/proc/{pid}/status").read_text(encoding="utf-8")
            except OSError:
                continue
            found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
            if found:
                peaks.append(int(found.group(1)) / 1024)
        return max(peaks) if peaks else None


@contextmanager
def http_servers(paths: HostPaths, processes: int, semantic: bool) -> Iterator[Servers]:
    """`processes` servers on the home, each on a port of its own; yields their MCP URLs and pids."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("ENGRAM_")}
    if not semantic:
        env["ENGRAM_EMBEDDING_MODEL"] = "off"
    with ExitStack() as stack:
        logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="engram-serve-")))
        started: list[tuple[subprocess.Popen[bytes], Path]] = []
        for n in range(processes):
            log = logs / f"serve-{n}.log"
            sink = stack.enter_context(log.open("w", encoding="utf-8"))
            command = [sys.executable, "-m", "engram_memory", "serve", "--http", "--port", "0"]
            process = subprocess.Popen(
                [*command, "--home", str(paths.home)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=sink,
                env=env,
            )
            stack.callback(_stop, process)
            started.append((process, log))
        urls = [_announced(process, log) for process, log in started]
        yield Servers(urls, [process.pid for process, _ in started])


def _announced(process: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = _ANNOUNCED.search(log.read_text(encoding="utf-8"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            raise SystemExit(f"serve --http exited: {log.read_text(encoding='utf-8')[-2000:]}")
        time.sleep(0.05)
    raise SystemExit("serve --http did not announce its address")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


class Agent:
    """One agent over streamable HTTP with its bearer token: the SDK's client, or the lean one (raw_mcp.py)."""

    def __init__(self, client: Client | RawToolClient) -> None:
        self._client = client

    async def call(self, tool: str, arguments: dict[str, Any], *, expect: str | None = None) -> dict[str, Any]:
        """The call's value; `expect` names the one error code that is an answer too (its envelope)."""
        if isinstance(self._client, RawToolClient):
            envelope: Any = await self._client.call_tool(tool, arguments)
        else:
            envelope = (await self._client.call_tool(tool, arguments)).structured_content
        if isinstance(envelope, dict) and envelope.get("ok"):
            value: dict[str, Any] = envelope["output"]["value"]
            return value
        if isinstance(envelope, dict) and expect is not None and envelope.get("error", {}).get("code") == expect:
            return envelope
        raise SystemExit(f"{tool} over HTTP failed: {envelope}")


async def _agent(stack: AsyncExitStack, url: str, token: str, *, raw: bool = False) -> Agent:
    if raw:
        lean = RawToolClient(url, token)
        stack.push_async_callback(lean.close)
        return Agent(lean)
    http_client = await stack.enter_async_context(create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}))
    transport = streamable_http_client(url, http_client=http_client)
    client = await stack.enter_async_context(Client(transport, mode="auto", read_timeout_seconds=120))
    return Agent(client)


@dataclass
class Acknowledged:
    """What one aggregate client was answered: capture arguments and admission keys, with their ids."""

    tenant: str
    captures: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (arguments, candidate id)
    admissions: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (arguments, record id)


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


async def _searches(agent: Agent, queries: list[str], purpose: str, until: Callable[[], bool] | None) -> list[float]:
    """One search at a time over `queries` (cycled while `until` is not yet true); latencies in ms."""
    latencies: list[float] = []
    n = 0
    while n < len(queries) or (until is not None and not until()):
        arguments = {"query": queries[n % len(queries)], "purpose_ref": purpose, "limit": 10}
        started = time.perf_counter()
        await agent.call("engram_memory_search", arguments)
        latencies.append(_ms_since(started))
        n += 1
        if until is not None and until():
            break
    return latencies


@dataclass
class Load:
    """What the measurements send: the stored workspace and its records, the writers' notes, the shape."""

    tenant: str
    workspace: str
    purpose: str
    record_ids: list[str]
    queries: list[str]
    warm_queries: list[str]  # asked untimed first: none of them is timed (a repeated query is cached)
    storm_queries: list[str]  # asked during the forget storm: none asked before
    notes: Callable[[], str]
    capture_arguments: Callable[[str, str, int], dict[str, Any]]
    processes: int
    clients: int
    seconds: float
    forgets: int
    semantic: bool
    load_client: str = "raw"  # the aggregate writers' client: "raw" (raw_mcp.py) or "sdk"


async def _aggregate(agents: list[Agent], acknowledged: list[Acknowledged], load: Load) -> float:
    """Every agent sends capture+admission pairs one call at a time until the deadline; the wall time."""
    deadline = time.monotonic() + load.seconds

    async def write(n: int) -> None:
        agent, mine, k = agents[n], acknowledged[n], 0
        while time.monotonic() < deadline:
            key = f"agg-{RUN}-{n:02d}-{k:09d}"
            arguments = load.capture_arguments(load.notes(), f"{key}-capture", 1_900_000_000_000 + k)
            captured = await agent.call("engram_memory_capture", arguments)
            mine.captures.append((arguments, captured["candidate_id"]))
            admission = {"candidate_id": captured["candidate_id"], "idempotency_key": f"{key}-admit"}
            admitted = await agent.call("engram_memory_request_admission", admission)
            mine.admissions.append((admission, admitted["outcome"]["record_id"]))
            k += 1

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for n in range(len(agents)):
            group.start_soon(write, n)
    return time.perf_counter() - started


async def _storm(searcher: Agent, forgetter: Agent, host: Any, doomed: list[str], load: Load) -> dict[str, Any]:
    """Searches one at a time while the forgetter forgets `doomed`, each approved by the host first."""
    forget_ms: list[float] = []
    done = False

    async def forget_all() -> None:
        nonlocal done
        try:
            for n, record_id in enumerate(doomed):
                arguments = {
                    "record_id": record_id,
                    "idempotency_key": f"storm-{RUN}-forget-{n:09d}",
                    "reason_ref": REASON,
                }
                await forgetter.call("engram_memory_forget", arguments, expect="gate_failed")
                await anyio.to_thread.run_sync(_approve, host, record_id)
                started = time.perf_counter()
                await forgetter.call("engram_memory_forget", arguments)
                forget_ms.append(_ms_since(started))
        finally:
            done = True

    async with anyio.create_task_group() as group:
        group.start_soon(forget_all)
        searches = await _searches(searcher, load.storm_queries, load.purpose, lambda: done)
    return {"storm_search": searches, "forget": forget_ms}


def doomed_ids(record_ids: list[str], forgets: int) -> list[str]:
    """The records the forget storm forgets (a kept home drops them from its import afterwards)."""
    return random.Random(7).sample(record_ids, min(forgets, len(record_ids) // 2))


def over_http(paths: HostPaths, load: Load) -> dict[str, Any]:
    """Runs the three measurements on one set of servers; latencies in ms, the aggregate's counts."""
    doomed = doomed_ids(load.record_ids, load.forgets)

    def token(tenant: str, workspace: str, session: str) -> Any:
        return bench_issued(paths, tenant=tenant, workspace=workspace, purpose=load.purpose, session=session)

    writers = [token(f"bench-tenant-{n:02d}", "w", f"bench-writer-{n:02d}") for n in range(load.clients)]
    acknowledged = [Acknowledged(tenant=f"bench-tenant-{n:02d}") for n in range(load.clients)]
    held_before = {mine.tenant: candidates_of(paths, mine.tenant) for mine in acknowledged}  # a kept home's
    figures: dict[str, Any] = {}
    begun = time.perf_counter()
    with (
        http_servers(paths, load.processes, load.semantic) as servers,
        open_engine(paths, semantic=load.semantic) as host,
    ):
        urls = servers.urls
        figures["http_start_s"] = time.perf_counter() - begun  # start-up verification included

        async def measure() -> None:
            async with AsyncExitStack() as stack:
                searcher = await _agent(stack, urls[0], token(load.tenant, load.workspace, "bench-http").token)
                await _searches(searcher, load.warm_queries, load.purpose, None)  # warm the server's caches
                figures["http_search"] = await _searches(searcher, load.queries, load.purpose, None)
                raw = load.load_client == "raw"
                agents = [await _agent(stack, urls[n % len(urls)], w.token, raw=raw) for n, w in enumerate(writers)]
                figures["aggregate_s"] = await _aggregate(agents, acknowledged, load)
                figures["aggregate_pairs"] = sum(len(mine.admissions) for mine in acknowledged)
                forget_token = token(load.tenant, load.workspace, "bench-forget").token
                forgetter = await _agent(stack, urls[1 % len(urls)], forget_token)
                figures.update(await _storm(searcher, forgetter, host, doomed, load))

        anyio.run(measure)
        figures["server_peak_rss_mb"] = servers.peak_rss_mb()  # before the check: it runs in this process
        figures["aggregate_check"] = _check(paths, host, writers, acknowledged, held_before)
    return figures


def _approve(host: Any, record_id: str) -> None:
    pending = [row for row, _ in host.confirmations() if row.target == record_id]
    if not pending:
        raise SystemExit(f"no confirmation request for {record_id}")
    host.approve_confirmation(pending[0].confirmation_id, decided_by="host:bench", ttl_ms=300_000)


def candidates_of(paths: HostPaths, tenant: str) -> int:
    """How many candidates the tenant has, read straight from the store (the owner's view)."""
    settings = store_settings(paths)
    if settings.is_postgres:
        import psycopg

        with psycopg.connect(settings.store, autocommit=True) as connection:
            row = connection.execute("SELECT count(*) FROM candidates WHERE tenant = %s", (tenant,)).fetchone()
    else:
        with closing(sqlite3.connect(f"file:{paths.sqlite_file}?mode=ro", uri=True)) as connection:
            row = connection.execute("SELECT count(*) FROM candidates WHERE tenant = ?", (tenant,)).fetchone()
    return int(row[0]) if row else 0


def _check(
    paths: HostPaths, host: Any, writers: list[Any], acknowledged: list[Acknowledged], held_before: dict[str, int]
) -> str:
    """Every acknowledged mutation is there exactly once, with its ids (beside what a kept home's tenant
    held before the run); then a full verify."""
    for issued, mine in zip(writers, acknowledged, strict=True):
        for arguments, candidate in mine.captures:
            again = host.handle(issued.binding, "engram_memory_capture", arguments)
            value = again["output"]["value"] if again["ok"] else {}
            if value.get("status") != "duplicate_exact" or value.get("candidate_id") != candidate:
                raise SystemExit(f"an acknowledged capture of {mine.tenant} did not replay: {again}")
        for arguments, record in mine.admissions:
            again = host.handle(issued.binding, "engram_memory_request_admission", arguments)
            value = again["output"]["value"] if again["ok"] else {}
            if value.get("replayed") is not True or value.get("outcome", {}).get("record_id") != record:
                raise SystemExit(f"an acknowledged admission of {mine.tenant} did not replay: {again}")
    for mine in acknowledged:
        held = candidates_of(paths, mine.tenant) - held_before[mine.tenant]
        if held != len(mine.captures):
            raise SystemExit(f"{mine.tenant} holds {held} candidates, {len(mine.captures)} acknowledged")
    problems = verify_store(host.deps, full=True)
    if problems.first is not None:
        raise SystemExit(f"verify failed after the aggregate load: {problems.first}")
    return "every acknowledged mutation present once; verify ok"
