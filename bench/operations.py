"""Times the host operations on a home of 10,000 records: backup, wipe + restore, restore on a fresh home, rotate-keys.

Run on demand (not part of `make test`): `.venv/bin/python bench/operations.py`. It builds the home
with the in-process engine from a deterministic corpus, runs each operation as the real `engram-memory`
command (so the times include the interpreter's start-up, as an operator sees them), checks that the
same searches return the same ids after the restore, prints a table and writes the "Host operations"
section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engram_memory.embeddings.loader import load_model
from engram_memory.host.compose import init_home, open_engine
from engram_memory.host.settings import HostPaths, embedding_model_from_environment, model_cache_from_environment
from harness import bench_binding, value_of

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "docs" / "benchmarks.md"
SECTION = "## Host operations"
PURPOSE = "purpose:bench"
SEED = 20_240_601
SUBJECTS = [
    "the billing service",
    "the search cluster",
    "the release train",
    "the payments queue",
    "the audit job",
    "the staging database",
    "the mobile client",
    "the ingest pipeline",
    "the auth gateway",
    "the report builder",
]
VERBS = ["needs", "keeps", "rotates", "drops", "retries", "pins", "caches", "mirrors", "throttles", "archives"]
OBJECTS = [
    "two approvals",
    "three replicas",
    "nightly snapshots",
    "idempotency keys",
    "a canary stage",
    "stale sessions",
    "its TLS certificates",
    "a read-only window",
    "per-tenant quotas",
    "old partitions",
]
REASONS = [
    "after the March incident",
    "to meet the audit",
    "because latency doubled",
    "since the vendor change",
    "for the quarterly review",
    "while the migration runs",
    "until the rewrite lands",
    "per the runbook",
]
QUERIES = [
    "billing approvals",
    "search cluster replicas",
    "release train canary",
    "payments queue retries",
    "audit snapshots",
    "staging database window",
    "auth gateway certificates",
    "ingest pipeline quotas",
]


def _sentence(rng: random.Random, n: int) -> str:
    return (
        f"{rng.choice(SUBJECTS).capitalize()} {rng.choice(VERBS)} {rng.choice(OBJECTS)} "
        f"{rng.choice(REASONS)} (note {n})."
    )


def _capture_args(text: str, n: int) -> dict[str, Any]:
    sha = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    payload = {
        "schema_version": 2,
        "purpose_ref": PURPOSE,
        "valid_time": {"t": 1_700_000_000_000 + n},
        "components": [{"component_id": "main", "kind": "decision", "text": text, "citation_ids": ["src"]}],
        "primary_component_id": "main",
        "primary_event": {"at": 1_700_000_000_000 + n, "type_ref": "event:decision-made", "citation_id": "src"},
        "citations": [
            {
                "citation_id": "src",
                "source_ref": "doc:runbook",
                "locator": {"scheme": "document", "value": f"runbook#{n}"},
                "content_digest": sha,
            }
        ],
    }
    evidence = {"evidence_ref": "evidence:bench", "evidence_digest": sha, "citation_ids": ["src"]}
    return {"idempotency_key": f"bench-capture-{n:08d}", "payload": payload, "evidence": evidence}


def build_home(paths: HostPaths, records: int) -> Any:
    init_home(paths)
    binding = bench_binding(paths, tenant="bench", workspace="ops", purpose=PURPOSE)
    rng = random.Random(SEED)
    with open_engine(paths) as engine:
        for n in range(records):
            captured = value_of(engine, binding, "engram_memory_capture", _capture_args(_sentence(rng, n), n))
            admit = {"candidate_id": captured["candidate_id"], "idempotency_key": f"bench-admit-{n:08d}"}
            outcome = value_of(engine, binding, "engram_memory_request_admission", admit)["outcome"]
            if outcome["status"] != "accepted":
                raise SystemExit(f"record {n} was not accepted: {outcome['status']}")
    return binding


def searches(paths: HostPaths, binding: Any) -> dict[str, list[str]]:
    with open_engine(paths) as engine:
        return {
            query: [
                p["record"]["record_id"]
                for p in value_of(
                    engine, binding, "engram_memory_search", {"query": query, "purpose_ref": PURPOSE, "limit": 20}
                )["records"]
            ]
            for query in QUERIES
        }


def timed_cli(*args: str | Path) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "engram_memory", *map(str, args), "--json"], capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(map(str, args[:1]))} failed: {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return seconds, result


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def run(records: int, folder: Path) -> list[tuple[str, str, str]]:
    paths = HostPaths(home=folder / "home")
    archive = folder / "engram.backup"
    started = time.perf_counter()
    binding = build_home(paths, records)
    build_s = time.perf_counter() - started
    store_bytes = _size(paths.store_dir)
    before = searches(paths, binding)

    backup_s, backup = timed_cli("backup", archive, "--home", paths.home)
    started = time.perf_counter()
    shutil.rmtree(paths.store_dir)
    wipe_s = time.perf_counter() - started
    restore_s, restored = timed_cli("restore", archive, "--home", paths.home)
    if searches(paths, binding) != before or restored["records"] != records:
        raise SystemExit("the restored home does not answer the same searches with the same ids")
    elsewhere = HostPaths(home=folder / "new-machine")
    keyfile = folder / "recovery.key"
    subprocess.run(
        [sys.executable, "-m", "engram_memory", "recovery-key", "export", "--output", keyfile, "--home", paths.home],
        capture_output=True,
        check=True,
    )
    init_home(elsewhere)
    rebuild_s, rebuilt = timed_cli("restore", archive, "--recovery-key", keyfile, "--home", elsewhere.home)
    if searches(elsewhere, binding) != before or rebuilt["keys_added"] != records:
        raise SystemExit("the home rebuilt on a fresh init does not answer the same searches with the same ids")
    rotate_s, rotated = timed_cli("rotate-keys", "--home", paths.home)
    if rotated["rewrapped"] != records or searches(paths, binding) != before:
        raise SystemExit("rotation did not re-wrap every key, or the searches changed")
    quick_s, quick = timed_cli("verify", "--quick", "--home", paths.home)
    full_s, full = timed_cli("verify", "--home", paths.home)
    if not (quick["ok"] and full["ok"]):
        raise SystemExit("the rotated home does not verify")

    return [
        ("build the home (capture + admit, in-process)", f"{build_s:.1f} s", f"{records} records"),
        (
            "`engram-memory backup FILE`",
            f"{backup_s:.2f} s",
            f"store {store_bytes / 1e6:.1f} MB -> archive {backup['bytes'] / 1e6:.1f} MB"
            f" (in-command {backup['seconds']:.2f} s)",
        ),
        ("wipe `store/`", f"{wipe_s:.3f} s", ""),
        (
            "`engram-memory restore FILE`",
            f"{restore_s:.2f} s",
            f"{restored['indexed']} records re-indexed and verified (in-command {restored['seconds']:.2f} s)",
        ),
        (
            "`init` elsewhere, then `restore FILE --recovery-key KEYFILE`",
            f"{rebuild_s:.2f} s",
            f"{rebuilt['keys_added']} data keys taken from the archive, re-indexed and verified"
            f" (in-command {rebuilt['seconds']:.2f} s)",
        ),
        (
            "`engram-memory rotate-keys`",
            f"{rotate_s:.2f} s",
            f"{rotated['rewrapped']} data keys re-wrapped, batch 500 (in-command {rotated['seconds']:.2f} s)",
        ),
        ("`engram-memory verify --quick` (serve's start-up check)", f"{quick_s:.2f} s", "chains, heads, replay"),
        ("`engram-memory verify`", f"{full_s:.2f} s", "also opens every body and checks the index"),
    ]


def machine() -> list[str]:
    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    model = load_model(embedding_model_from_environment(), model_cache_from_environment())
    semantic = "no embedding model" if model is None else "the semantic extra installed (restores re-embed)"
    return [
        f"{os.cpu_count()} cores, {platform.machine()}, {platform.system()} {platform.release()}",
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, {semantic}",
        f"load average {load} when the run ended",
    ]


def write_section(rows: list[tuple[str, str, str]], records: int) -> None:
    lines = [
        SECTION,
        "",
        f"Command: `.venv/bin/python bench/operations.py --records {records}` (run on demand, not by `make test`).",
        "Each operation runs as the real command with `--json`; times are wall clock and include the",
        "interpreter's start-up (the command's own figure is in brackets). The corpus is generated from a",
        "fixed seed; after each restore (the same home, and a fresh `init` given the recovery key) and after",
        "the rotation the same 8 searches return the same ids.",
        "",
        "Machine: " + "; ".join(machine()) + ".",
        "",
        "| operation | time | notes |",
        "|---|---|---|",
        *(f"| {name} | {took} | {notes} |" for name, took, notes in rows),
        "",
    ]
    text = BENCHMARKS.read_text(encoding="utf-8") if BENCHMARKS.exists() else "# Benchmarks\n\n"
    start = text.find(SECTION)
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines)
    else:
        end = text.find("\n## ", start + len(SECTION))
        text = text[:start] + "\n".join(lines) + ("" if end == -1 else text[end:])
    BENCHMARKS.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="engram-bench-") as folder:
        rows = run(options.records, Path(folder))
    width = max(len(name) for name, _, _ in rows)
    for line in machine():
        print(line)
    for name, took, notes in rows:
        print(f"{name:<{width}}  {took:>9}  {notes}")
    if not options.no_write:
        write_section(rows, options.records)
        print(f"wrote the '{SECTION[3:]}' section of {BENCHMARKS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
