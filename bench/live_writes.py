"""Search while other `serve` processes write into the same workspace, for bench/scale.py (issue 42).

One agent searches the workspace while nothing else happens (quiet) and while `writers` other `serve
--http` processes capture and admit `rate` pairs a second in all into the same workspace (busy), each
writer pacing its pairs evenly with the lean client of raw_mcp.py. Quiet and busy alternate in four
windows each, so that the machine's own drift falls on both alike; a quiet window starts once every
record written before it has its vector, a busy one 5 s after the writers start. The searches run twice:
in this process (an engine of its own on the store, as a host would have) and over MCP stdio through the
SDK's client and a real `engram-memory serve` (what an agent's client runs), each after 50 untimed
searches of other queries. Reported: p50/p95 quiet and busy, their p95 ratio, the pairs actually
written, and the proportional set size (PSS: shared pages divided among the processes sharing them) of
each `serve` process after it answered, read from /proc/PID/smaps_rollup.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from engram_memory.host.compose import open_engine
from engram_memory.host.settings import HostPaths
from harness import RUN, bench_binding, bench_issued, value_of
from scale_server import http_servers


@dataclass(frozen=True)
class LiveLoad:
    tenant: str
    workspace: str
    purpose: str
    warm_queries: list[str]  # asked untimed first; none is timed (a repeated query's vector is cached)
    queries: list[str]  # asked while nothing else happens
    busy_queries: list[str]  # as many others, asked while the writers write (a repeated query is cached)
    notes: Callable[[], str]
    capture_arguments: Callable[[str, str, int], dict[str, Any]]
    writers: int
    rate: float  # capture+admission pairs a second, all writers together
    semantic: bool
    settled: Callable[[], float]  # waits until the serve processes have embedded what was written


def pss_mb(pid: int) -> float | None:
    """The process's proportional set size, or None where /proc has none."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in rollup.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) / 1024
    return None


def _children_serving_stdio(home: Path) -> list[int]:
    """This process's children that run `serve` over stdio on the home (the SDK's client starts them)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text(encoding="utf-8")
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        words = [part.decode("utf-8", "replace") for part in command]
        if parent == os.getpid() and "serve" in words and "--http" not in words and str(home) in words:
            found.append(int(entry.name))
    return found


# The writers' servers load their model and catch their index up before a busy window is timed.
WARM_UP_S = 5.0
# Captures prepared for one busy window: the writers stop early when a window runs longer than this.
MAX_PHASE_S = 600
# Windows each phase's searches are split into, quiet and busy alternating.
WINDOWS = 4


class _Writers:
    """The writers (bench/live_writer.py) in a process of their own: started, stopped, pairs written."""

    def __init__(self, urls: list[str], token: str, load: LiveLoad, folder: Path, label: str) -> None:
        self._spec = folder / f"writers-{label}.json"
        count = int(load.rate * MAX_PHASE_S)
        captures = [
            load.capture_arguments(load.notes(), f"live-{RUN}-{label}-capture-{n:09d}", 1_900_000_000_000 + n)
            for n in range(count)
        ]
        self._spec.write_text(json.dumps({"urls": urls, "token": token, "rate": load.rate, "captures": captures}))
        self._process: subprocess.Popen[str] | None = None
        self.pairs = 0
        self.seconds = 0.0

    def __enter__(self) -> _Writers:
        script = Path(__file__).with_name("live_writer.py")
        self._process = subprocess.Popen(
            [sys.executable, str(script), str(self._spec)], stdout=subprocess.PIPE, text=True
        )
        return self

    def __exit__(self, *_: object) -> None:
        assert self._process is not None
        self._process.send_signal(signal.SIGTERM)
        out, _ = self._process.communicate(timeout=120)
        if self._process.returncode != 0:
            raise SystemExit(f"the live writers failed ({self._process.returncode})")
        figures = json.loads(out)
        self.pairs, self.seconds = int(figures["pairs"]), float(figures["seconds"])


@contextlib.contextmanager
def _in_process(paths: HostPaths, load: LiveLoad) -> Iterator[Callable[[list[str]], list[float]]]:
    """Timed searches on an engine of this process's own, warmed once (the model, the index, the caches)."""
    with open_engine(paths, semantic=load.semantic) as engine:
        binding = bench_binding(paths, tenant=load.tenant, workspace=load.workspace, purpose=load.purpose)
        for query in load.warm_queries:
            value_of(engine, binding, "engram_memory_search", {"query": query, "purpose_ref": load.purpose})

        def searches(queries: list[str]) -> list[float]:
            timings = []
            for query in queries:
                arguments = {"query": query, "purpose_ref": load.purpose, "limit": 10}
                started = time.perf_counter()
                value_of(engine, binding, "engram_memory_search", arguments)
                timings.append((time.perf_counter() - started) * 1000)
            return timings

        yield searches


def _windows(
    load: LiveLoad, searches: Callable[[list[str]], list[float]], writing: Callable[[], _Writers]
) -> tuple[list[float], list[float]]:
    """Quiet and busy searches in alternating windows (quiet, busy, quiet, busy, ...): the machine's own
    drift over the minutes a phase takes falls on both alike, and their ratio measures the writes."""
    quiet: list[float] = []
    busy: list[float] = []
    for n in range(WINDOWS):
        load.settled()
        quiet += searches(_window(load.queries, n))
        with writing():
            time.sleep(WARM_UP_S)
            busy += searches(_window(load.busy_queries, n))
    return quiet, busy


def _window(queries: list[str], n: int) -> list[str]:
    size = -(-len(queries) // WINDOWS)
    return queries[n * size : (n + 1) * size]


def _over_stdio(
    paths: HostPaths, load: LiveLoad, writing: Callable[[], _Writers]
) -> tuple[list[float], list[float], float | None]:
    """(quiet, busy) search latencies of an agent over MCP stdio, and its server's PSS after them."""
    from mcp import Client, StdioServerParameters

    token = bench_issued(
        paths, tenant=load.tenant, workspace=load.workspace, purpose=load.purpose, session="live"
    ).token
    env = {"ENGRAM_BINDING": token, **({} if load.semantic else {"ENGRAM_EMBEDDING_MODEL": "off"})}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engram_memory", "serve", "--home", str(paths.home)], env=env
    )
    found: dict[str, Any] = {}

    async def run() -> None:
        async with Client(params) as client:

            async def searches(queries: list[str]) -> list[float]:
                timings = []
                for query in queries:
                    arguments = {"query": query, "purpose_ref": load.purpose, "limit": 10}
                    started = time.perf_counter()
                    envelope = (await client.call_tool("engram_memory_search", arguments)).structured_content
                    if not isinstance(envelope, dict) or not envelope.get("ok"):
                        raise SystemExit(f"search over stdio failed: {envelope}")
                    timings.append((time.perf_counter() - started) * 1000)
                return timings

            await searches(load.warm_queries)
            found["quiet"], found["busy"] = [], []
            for n in range(WINDOWS):
                await anyio.to_thread.run_sync(load.settled)
                found["quiet"] += await searches(_window(load.queries, n))
                with writing():
                    await anyio.sleep(WARM_UP_S)
                    found["busy"] += await searches(_window(load.busy_queries, n))
            pids = _children_serving_stdio(paths.home)
            found["pss"] = pss_mb(pids[0]) if len(pids) == 1 else None

    anyio.run(run)
    return found["quiet"], found["busy"], found["pss"]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _phase_keys(prefix: str, quiet: list[float], busy: list[float]) -> dict[str, float]:
    out = {}
    for phase, values in (("quiet", quiet), ("busy", busy)):
        for label, q in (("p50", 0.50), ("p95", 0.95)):
            out[f"{prefix}_{phase}_{label}_ms"] = round(_percentile(values, q), 2)
    out[f"{prefix}_busy_over_quiet_p95"] = round(out[f"{prefix}_busy_p95_ms"] / out[f"{prefix}_quiet_p95_ms"], 2)
    return out


def measure(paths: HostPaths, load: LiveLoad) -> dict[str, Any]:
    """The live-writes figures as bench/scale.py's JSON keys (`live_…`)."""
    token = bench_issued(
        paths, tenant=load.tenant, workspace=load.workspace, purpose=load.purpose, session="writer"
    ).token
    out: dict[str, Any] = {
        "live_writers": load.writers,
        "live_write_rate": load.rate,
        "live_searches": len(load.queries),
    }
    written: list[_Writers] = []
    with http_servers(paths, load.writers, load.semantic) as servers, tempfile.TemporaryDirectory() as folder:

        def writing() -> _Writers:
            written.append(_Writers(servers.urls, token, load, Path(folder), str(len(written))))
            return written[-1]

        with _in_process(paths, load) as searches:
            quiet_local, busy_local = _windows(load, searches, writing)
        quiet_stdio, busy_stdio, stdio_pss = _over_stdio(paths, load, writing)
        out["live_pairs_written"] = sum(w.pairs for w in written)
        seconds = sum(w.seconds for w in written)
        out["live_pairs_per_s"] = round(out["live_pairs_written"] / seconds, 2) if seconds else None
        out.update(_phase_keys("live_search", quiet_local, busy_local))
        out.update(_phase_keys("live_mcp_search", quiet_stdio, busy_stdio))
        readings = [stdio_pss, *(pss_mb(pid) for pid in servers.pids)]
        out["live_serve_pss_mb"] = [None if value is None else round(value, 1) for value in readings]
    return out
