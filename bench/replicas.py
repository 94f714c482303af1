"""Beyond one machine: hot standbys answering a writing team's searches, PgBouncer, and a failover drill.

Run on demand (not part of `make test`):

    .venv/bin/python bench/replicas.py [--notes N] [--agents A] [--seconds S] [--json]

It builds its own loopback topology from the installed PostgreSQL binaries (tests/support/topology.py):
a primary, a standby, a second standby replaying `--delay-ms` late (`recovery_min_apply_delay`), and
PgBouncer in transaction mode in front of the primary (store and vault; statements unprepared). A home is
made on it and filled with N notes; then, in one server process (the engine in process, as `serve` runs
it), A agents search for S seconds, and every tenth step one writes a note and searches for it at once
(a miss is a stale read). Measured: the share of searches standbys answered, the waits for a standby to
replay an agent's own write (p50/p99), reads sent back to the primary, and the primary's CPU (its
postmaster and children, from /proc) per 1,000 searches; then the same without standbys. Then searches
alone by 1, 2 and 4 agents against the primary only and against primary + standby: searches/s and p99
(on 2 cores the clients, the engine and both servers share the same two cores: no scaling curve can show
here, only where the work goes). Last, a failover drill on a second topology with a synchronous standby:
four writers, the primary killed and the standby promoted; how long writes were unavailable and how many
acknowledged mutations were lost. Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.failover import failover_drill
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.postgres import APP_ROLE, OWNER_ROLE
from tests.support.replica_load import LoadFigures, note, team_load
from tests.support.topology import Topology, configure_home, failover_home

from engram_memory.host.compose import init_home, open_engine
from engram_memory.host.settings import HostPaths

P99_TARGET_MS = 100.0


def percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def pooled_home(folder: Path, topology: Topology) -> HostPaths:
    """As docs/operations.md says: `init` on the primary, then the pooler and the standbys in config.toml."""
    assert topology.bouncer is not None
    store, keys = topology.new_database("bench"), topology.new_database("bench_keys")
    paths = HostPaths(home=folder)
    primary = topology.primary
    init_home(paths, primary.url(OWNER_ROLE, store), app_role=APP_ROLE, vault=primary.url(OWNER_ROLE, keys))
    configure_home(
        paths,
        store=topology.bouncer.url(OWNER_ROLE, store),
        vault=topology.bouncer.url(OWNER_ROLE, keys),
        direct_url=primary.url(OWNER_ROLE, store),
        read_urls=tuple(node.url(OWNER_ROLE, store) for node in topology.standbys),
        prepared_statements=False,
    )
    topology.caught_up(delayed_too=True)
    return paths


def row(name: str, figures: LoadFigures) -> dict[str, Any]:
    routing = figures.routing
    waits_ms = [wait * 1000 for wait in routing.waits_s] if routing is not None else []
    return {
        "run": name,
        "searches": figures.searches,
        "searches_per_s": round(figures.searches / figures.seconds, 1),
        "p50_ms": round(percentile(figures.latencies_ms, 0.5), 2),
        "p99_ms": round(percentile(figures.latencies_ms, 0.99), 2),
        "writes": figures.writes,
        "stale_reads": figures.stale,
        "standby_share": round(figures.standby_share, 3),
        "waited": len(waits_ms),
        "wait_p50_ms": round(percentile(waits_ms, 0.5), 2),
        "wait_p99_ms": round(percentile(waits_ms, 0.99), 2),
        "fallbacks": routing.fallbacks if routing is not None else 0,
        "primary_cpu_s_per_1000": round(figures.primary_cpu_s / max(1, figures.searches) * 1000, 3),
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    scratch = Path(tempfile.mkdtemp(prefix="engram-bench-replicas-"))
    try:
        return _measure(args, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _measure(args: argparse.Namespace, scratch: Path) -> dict[str, Any]:
    results: dict[str, Any] = {"steady": [], "throughput": [], "failover": {}}
    with Topology.built(standbys=2, delayed_ms=args.delay_ms, pooler=True) as topology:
        paths = pooled_home(scratch / "home", topology)
        issued = bind(paths)
        standbys = tuple(node.url(OWNER_ROLE, "bench") for node in topology.standbys)
        with open_engine(paths, runtime=True, semantic=False) as engine:
            InProcessAgent(engine, issued.binding).remember_many([note(n)[0] for n in range(args.notes)])
        topology.caught_up(delayed_too=True)
        first = args.notes
        for name, read_urls in (("primary + 2 standbys (one late)", standbys), ("primary only", ())):
            configure_home(paths, read_urls=read_urls)
            with open_engine(paths, runtime=True, semantic=False) as engine:
                figures = team_load(
                    engine,
                    issued.binding,
                    topology.primary,
                    agents=args.agents,
                    seconds=args.seconds,
                    write_every=10,
                    first=first,
                )
            first += figures.writes + 1
            results["steady"].append(row(name, figures))
        for name, read_urls in (("primary only", ()), ("primary + 1 standby", standbys[:1])):
            configure_home(paths, read_urls=read_urls)
            with open_engine(paths, runtime=True, semantic=False) as engine:
                for agents in (1, 2, 4):
                    figures = team_load(
                        engine,
                        issued.binding,
                        topology.primary,
                        agents=agents,
                        seconds=args.seconds / 2,
                        write_every=10**9,
                        first=first,
                    )
                    results["throughput"].append({"agents": agents, **row(name, figures)})
    with Topology.built(standbys=1, synchronous=True) as topology:
        paths = failover_home(scratch / "failover", topology)
        issued = bind(paths)
        with open_engine(paths, runtime=True, semantic=False) as engine:
            drill = failover_drill(engine, issued.binding, topology, writers=4, each_side=100)
        results["failover"] = {
            "writers": 4,
            "acknowledged": len(drill.acknowledged),
            "acknowledged_before_crash": drill.before_crash,
            "unavailable_s": round(drill.unavailable_s, 2),
            "retried_calls": len(drill.retried),
            "lost": len(drill.lost),
            "duplicated": len(drill.acknowledged) - len(set(drill.acknowledged)),
        }
    results["machine"] = {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load": os.getloadavg(),
        "notes": args.notes,
        "agents": args.agents,
        "seconds": args.seconds,
        "delay_ms": args.delay_ms,
    }
    return results


def table(results: dict[str, Any]) -> list[str]:
    lines = [
        "| run | searches/s | p50 ms | p99 ms | writes | stale | standby share | waited (p50/p99 ms) |"
        " fallbacks | primary CPU s / 1,000 searches |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for item in results["steady"]:
        lines.append(
            f"| {item['run']} | {item['searches_per_s']} | {item['p50_ms']} | {item['p99_ms']} | {item['writes']}"
            f" | {item['stale_reads']} | {item['standby_share']:.1%} | {item['waited']} ({item['wait_p50_ms']}"
            f" / {item['wait_p99_ms']}) | {item['fallbacks']} | {item['primary_cpu_s_per_1000']} |"
        )
    lines += ["", "| searches only | agents | searches/s | p50 ms | p99 ms | standby share | primary CPU s / 1,000 |"]
    lines.append("|---|---|---|---|---|---|---|")
    for item in results["throughput"]:
        lines.append(
            f"| {item['run']} | {item['agents']} | {item['searches_per_s']} | {item['p50_ms']} | {item['p99_ms']}"
            f" | {item['standby_share']:.1%} | {item['primary_cpu_s_per_1000']} |"
        )
    for run in ("primary only", "primary + 1 standby"):
        within = [i for i in results["throughput"] if i["run"] == run and i["p99_ms"] <= P99_TARGET_MS]
        best = max((i["searches_per_s"] for i in within), default=0.0)
        lines.append(f"\n{run}: {best} searches/s at p99 <= {P99_TARGET_MS:.0f} ms")
    drill = results["failover"]
    lines += [
        "",
        f"Failover drill ({drill['writers']} writers, synchronous standby promoted): writes unavailable"
        f" {drill['unavailable_s']} s, {drill['acknowledged']} mutations acknowledged"
        f" ({drill['acknowledged_before_crash']} before the crash), {drill['retried_calls']} calls retried,"
        f" {drill['lost']} lost, {drill['duplicated']} applied twice.",
    ]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--delay-ms", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = measure(args)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print("\n".join(table(results)))
    print(f"\nmachine: {results['machine']}")


if __name__ == "__main__":
    main()
