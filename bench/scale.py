"""Speed at scale: ingest, search, get, the store's own full-text floor, memory and disk, in process and
over MCP stdio.

Run on demand (not part of `make test`):

    .venv/bin/python bench/scale.py --records N [--workspaces W] [--store sqlite|postgresql://…] [--json]

The corpus is synthetic but shaped like real notes: sentences of the LoCoMo turns in `--corpus`
(default ../shared/data/locomo-dev) are cut into clauses and recombined with a fixed seed, with names,
numbers and lengths varied, so term frequencies and lengths follow conversation text without copying
it. Every record is captured and admitted through the engine, spread round-robin over W workspaces.
Then, each as p50/p95/p99 over `--ops` operations (at least 1,000): capture+admission and search over
MCP stdio through the SDK's client and a real `engram-memory serve`; search, aggregate writes of many
tenants and a forget storm over streamable HTTP through `serve --http` processes (bench/scale_server.py:
`--processes`, `--clients`); search and get in process; and
the floor, the same top-10 full-text query issued straight to the store (FTS5 `bm25()`, or
`ts_rank` over the tsvector column) on the same data. Peak RSS is this process's (it runs the ingest
and the exactly-once check with a full verify itself); `server_peak_rss_mb` is the largest peak of the
`serve --http` processes, read from /proc before they stop; database size is the store's files (or the
PostgreSQL database). `--writers W --write-rate R` adds bench/live_writes.py: search (in process and over
stdio) first quiet, then while W other `serve --http` processes capture and admit R pairs a second into
the searched workspace, with each serve process's PSS. With `--channels hybrid` a workspace of 50,000 memories
or more gets its shared vector files after the import (`shared vector files written in … s`), and
`graph_pool_recall` / `graph_top10_recall` say how much of exact search's semantic pool the graph's holds.
`--home DIR` keeps the store: a later run with the same options measures it again without importing
(`--import-only` stops after the import); the measurements' own writes stay in it.
Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from engram_memory.contract.payloads import Citation, one_source_payload
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.text import query_terms
from engram_memory.host.compose import init_home, open_engine, store_settings
from engram_memory.host.settings import HostPaths
from harness import RUN, bench_binding, bench_issued, value_of

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT.parent / "shared" / "data" / "locomo-dev"
PURPOSE = "purpose:scale"
TENANT = "scale"
SEED = 20_261_130
# Untimed searches before each timed series, of queries none of the timed ones repeats: a repeated
# query's vector comes from the cache, and a timed series that began with the warm-up's own queries
# was 5 % cached queries.
WARM_QUERIES = 50
NAMES = [
    "Ava", "Ben", "Chloe", "Dmitri", "Elif", "Farah", "Goran", "Hana", "Ines", "Jonas", "Kemal", "Lena",
    "Mateo", "Noor", "Oskar", "Priya", "Quinn", "Rosa", "Sami", "Tomas", "Uma", "Vera", "Wen", "Yusuf",
]  # fmt: skip
_CLAUSE = re.compile(r"[^.!?;,]+[.!?;,]?")
_WORD = re.compile(r"[A-Za-z][A-Za-z']+")


# -- the corpus -------------------------------------------------------------------------------------


def _clauses(corpus: Path) -> list[str]:
    """Clauses of every turn in the folder's LoCoMo files: the raw material, never used whole."""
    found: list[str] = []
    for path in sorted(corpus.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for key, turns in data.items():
            if not key.startswith("session_") or not isinstance(turns, list):
                continue
            for turn in turns:
                text = unicodedata.normalize("NFC", str(turn.get("text", "")))
                found.extend(c.strip() for c in _CLAUSE.findall(text) if len(c.split()) >= 3)
    if not found:
        raise SystemExit(f"no LoCoMo turns in {corpus}")
    return found


class Corpus:
    """Deterministic notes: 1-3 clauses each, a subject, now and then a number or a swapped word."""

    def __init__(self, corpus: Path, seed: int = SEED) -> None:
        self._clauses = _clauses(corpus)
        self._vocabulary = sorted({w.lower() for c in self._clauses for w in _WORD.findall(c) if len(w) > 3})
        self._random = random.Random(seed)

    def note(self) -> str:
        pick = self._random
        parts = [pick.choice(self._clauses) for _ in range(pick.choice((1, 1, 2, 2, 2, 3)))]
        words = " ".join(parts).split()
        for _ in range(pick.randint(0, 3)):  # vary the wording so notes do not repeat
            words[pick.randrange(len(words))] = pick.choice(self._vocabulary)
        if pick.random() < 0.3:
            words.insert(pick.randrange(len(words) + 1), str(pick.randint(2, 9_999)))
        return f"{pick.choice(NAMES)}: {' '.join(words)}"

    def state(self) -> list[Any]:
        """The generator's state as JSON can hold it (a kept import resumes the run where it left off)."""
        version, internal, gauss = self._random.getstate()
        return [version, list(internal), gauss]

    def restore(self, state: list[Any]) -> None:
        version, internal, gauss = state
        self._random.setstate((version, tuple(internal), gauss))

    def query(self, note: str) -> str:
        """Two to four words of a stored note: what an agent asking about it might type."""
        words = [w for w in _WORD.findall(note) if len(w) > 3]
        pick = self._random
        return " ".join(pick.sample(words, min(len(words), pick.randint(2, 4)))) or note


# -- measuring ----------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def timed(action: Callable[..., Any], *arguments: Any) -> float:
    started = time.perf_counter()
    action(*arguments)
    return (time.perf_counter() - started) * 1000


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def capture_arguments(text: str, key: str, at_ms: int) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(text.encode()).hexdigest()
    payload = one_source_payload(PURPOSE, text, at_ms, Citation("src", "notes:scale", "document", key, digest))
    evidence = {"evidence_ref": "evidence:scale", "evidence_digest": digest, "citation_ids": ["src"]}
    return {"idempotency_key": key, "payload": payload, "evidence": evidence}


@dataclass
class Stored:
    """What ingest kept for the measurements: record ids and the note of each, per workspace."""

    ids: dict[str, list[str]]
    notes: dict[str, list[str]]


# -- the floor ----------------------------------------------------------------------------------------


@contextmanager
def floor_query(paths: HostPaths) -> Iterator[Callable[[Scope, str], int]]:
    """The store's own top-10 full-text query for a search's terms in its scope (no engine around it)."""
    settings = store_settings(paths)
    if settings.is_postgres:
        import psycopg

        from engram_memory.stores.postgres.queries import _RANK_WEIGHTS, any_term_query, in_scope_query

        with psycopg.connect(settings.store, autocommit=True) as connection:

            def pg(scope: Scope, query: str) -> int:
                terms = query_terms(query)
                rows = connection.execute(
                    "SELECT rid FROM lexical_index WHERE tsv @@ %s::tsquery AND tenant = %s AND workspace = %s"
                    f" ORDER BY ts_rank('{_RANK_WEIGHTS}', tsv, %s::tsquery) DESC LIMIT 10",
                    (in_scope_query(scope, terms), scope.tenant, scope.workspace, any_term_query(terms)),
                ).fetchall()
                return len(rows)

            yield pg
        return
    from engram_memory.stores.sqlite.queries import _BM25_WEIGHTS, _match_expression

    connection = sqlite3.connect(f"file:{paths.sqlite_file}?mode=ro", uri=True)
    try:

        def lite(scope: Scope, query: str) -> int:
            rows = connection.execute(
                "SELECT rowid FROM lexical_index WHERE lexical_index MATCH ?"
                f" ORDER BY bm25(lexical_index, {_BM25_WEIGHTS}) LIMIT 10",
                (_match_expression(scope, query_terms(query)),),
            ).fetchall()
            return len(rows)

        yield lite
    finally:
        connection.close()


SETTLE_TIMEOUT_S = 900.0


def vectors_settled(paths: HostPaths, scope: Scope, semantic: bool) -> float:
    """Waits until every current record of the scope has its vector: the serve processes that wrote have
    embedded what they wrote, so a quiet phase measures searches with nothing else running. The seconds
    waited."""
    if not semantic:
        return 0.0
    from engram_memory.embeddings.loader import load_model
    from engram_memory.host.compose import open_store

    model = load_model()
    if model is None:
        return 0.0
    started = time.monotonic()
    store = open_store(paths)
    try:
        while True:
            with store.read() as tx:
                if not tx.records_without_vector(scope, (model.vector_id,)):
                    return time.monotonic() - started
            if time.monotonic() - started > SETTLE_TIMEOUT_S:
                raise SystemExit(f"{scope.workspace}: records still without vectors after {SETTLE_TIMEOUT_S:.0f} s")
            time.sleep(0.5)
    finally:
        store.close()


def db_mb(paths: HostPaths) -> float:
    settings = store_settings(paths)
    if settings.is_postgres:
        import psycopg

        with psycopg.connect(settings.store, autocommit=True) as connection:
            row = connection.execute("SELECT pg_database_size(current_database())").fetchone()
        return round(int(row[0]) / 2**20, 1) if row else 0.0
    files = [paths.sqlite_file, *paths.sqlite_file.parent.glob(paths.sqlite_file.name + "-*")]
    return round(sum(f.stat().st_size for f in files if f.exists()) / 2**20, 1)


# -- the run ------------------------------------------------------------------------------------------


def ingest(
    paths: HostPaths, corpus: Corpus, records: int, workspaces: int, semantic: bool, batch: int
) -> tuple[Stored, float]:
    """Imports the corpus through the host's import path, `batch` captures+admissions per commit, each
    batch into one workspace, the workspaces in turn (batch 1: each pair commits alone)."""
    stored = Stored(ids={}, notes={})
    names = [f"workspace-{n + 1:04d}" for n in range(workspaces)]
    at_ms = 1_700_000_000_000
    batch = max(1, min(batch, -(-records // workspaces)))  # every workspace gets its share
    with open_engine(paths, semantic=semantic) as engine:
        bindings = {name: bench_binding(paths, tenant=TENANT, workspace=name, purpose=PURPOSE) for name in names}
        started = time.perf_counter()
        reported = 0
        for first in range(0, records, batch):
            name = names[(first // batch) % workspaces]
            notes = [corpus.note() for _ in range(first, min(first + batch, records))]
            items = [
                (
                    capture_arguments(note, f"scale-capture-{first + i:09d}", at_ms + first + i),
                    f"scale-admit-{first + i:09d}",
                )
                for i, note in enumerate(notes)
            ]
            for note, outcome in zip(notes, engine.import_memories(bindings[name], items), strict=True):
                admitted = outcome.admitted
                if admitted is None or not admitted["ok"]:
                    raise SystemExit(f"import failed: {outcome}")
                status = admitted["output"]["value"]["outcome"]
                if status["status"] == "accepted":
                    stored.ids.setdefault(name, []).append(status["record_id"])
                    stored.notes.setdefault(name, []).append(note)
            done = min(first + batch, records)
            if done - reported >= 10_000:
                reported = done
                rate = done / (time.perf_counter() - started)
                print(f"  ingested {done:,} ({rate:,.0f}/s)", file=sys.stderr, flush=True)
        if engine.deps.indexer is not None:
            engine.deps.indexer.settle()
        engine.refresh_statistics()  # as the host's `import` ends
        seconds = time.perf_counter() - started
        share_bases(engine, paths, names)
        return stored, seconds


def share_bases(engine: Any, paths: HostPaths, names: list[str]) -> None:
    """Asks for each large workspace's shared vector files with one search, and waits for them to be
    written (a served scope would get them at its first search), so that what follows is timed on them."""
    cache = engine.deps.semantic
    if cache is None or cache.shared is None:
        return
    started = time.perf_counter()
    for name in names:
        binding = bench_binding(paths, tenant=TENANT, workspace=name, purpose=PURPOSE)
        value_of(engine, binding, "engram_memory_search", {"query": "warm up", "purpose_ref": PURPOSE})
    cache.shared.settle()
    print(f"  shared vector files written in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


def share_bases_of(paths: HostPaths, semantic: bool, names: list[str]) -> None:
    """A kept home's bases, brought up to date as an import's would be (a no-op where they are)."""
    if semantic:
        with open_engine(paths, semantic=True) as engine:
            share_bases(engine, paths, names)


def per_call_writes(paths: HostPaths, corpus: Corpus, stored: Stored, ops: int, semantic: bool) -> list[float]:
    """capture then request_admission as two separate tool calls, each committing on its own."""
    name = sorted(stored.ids)[0]
    writes: list[float] = []
    with open_engine(paths, semantic=semantic) as engine:
        binding = bench_binding(paths, tenant=TENANT, workspace=name, purpose=PURPOSE)
        for n in range(ops):
            note = corpus.note()

            def write(n: int = n, note: str = note) -> None:
                arguments = capture_arguments(note, f"call-{RUN}-capture-{n:09d}", 1_750_000_000_000 + n)
                captured = value_of(engine, binding, "engram_memory_capture", arguments)
                admit = {"candidate_id": captured["candidate_id"], "idempotency_key": f"call-{RUN}-admit-{n:09d}"}
                value_of(engine, binding, "engram_memory_request_admission", admit)

            writes.append(timed(write))
        if engine.deps.indexer is not None:
            engine.deps.indexer.settle()
    return writes


RECALL_QUERIES = 200


def graph_recall(paths: HostPaths, corpus: Corpus, stored: Stored) -> dict[str, float]:
    """How much of exact search's semantic pool (150 nearest) and of its ten best the shared graph's pool
    holds, on RECALL_QUERIES queries of the largest workspace that has a base: the only thing the graph
    may change (scores are computed exactly either way). Empty without shared files."""
    from engram_memory.embeddings.loader import load_model
    from engram_memory.engine.recall.semantic import SEMANTIC_POOL, VectorCache
    from engram_memory.engine.recall.shared_builds import SharedBases
    from engram_memory.engine.recall.shared_index import BaseFiles
    from engram_memory.host.compose import open_store

    model = load_model()
    if model is None:
        return {}
    exact, shared = VectorCache(model), VectorCache(model, SharedBases(BaseFiles(paths.vectors_dir), background=False))
    name = max(stored.ids, key=lambda workspace: len(stored.ids[workspace]))
    scope = Scope(TENANT, name)
    if shared.shared is None or shared.shared.current(scope, shared.vector_id, shared.dimension) is None:
        return {}
    pick = random.Random(SEED + 2)
    queries = [corpus.query(pick.choice(stored.notes[name])) for _ in range(RECALL_QUERIES)]
    pools, tops = [], []
    store = open_store(paths)
    try:
        with store.read() as tx:
            head = tx.head(scope)
            generation = 0 if head is None else head.records_cursor
            now = int(time.time() * 1000)

            def pool(cache: VectorCache, query: str) -> list[str]:
                started = cache.start(tx, scope, generation, lambda _: {}, query, valid_at_ms=now, limit=SEMANTIC_POOL)
                answer = cache.finish(tx, started, lambda _: {})
                return [n.record_id for n in answer.nearest]

            for query in queries:
                truth, found = pool(exact, query), set(pool(shared, query))
                pools.append(len(found.intersection(truth)) / max(1, len(truth)))
                tops.append(len(found.intersection(truth[:10])) / max(1, len(truth[:10])))
    finally:
        store.close()
    return {
        "graph_pool_recall": round(statistics.fmean(pools), 4),
        "graph_top10_recall": round(statistics.fmean(tops), 4),
    }


def in_process(paths: HostPaths, corpus: Corpus, stored: Stored, ops: int, semantic: bool) -> dict[str, list[float]]:
    names = sorted(stored.ids)
    pick = random.Random(SEED + 1)
    queries = []
    for _ in range(WARM_QUERIES + ops):
        name = pick.choice(names)
        queries.append((name, corpus.query(pick.choice(stored.notes[name]))))
    warm, queries = queries[:WARM_QUERIES], queries[WARM_QUERIES:]
    lookups = [(name, pick.choice(stored.ids[name])) for name in (pick.choice(names) for _ in range(ops))]
    searches: list[float] = []
    gets: list[float] = []
    floors: list[float] = []
    with open_engine(paths, semantic=semantic) as engine:
        bindings = {name: bench_binding(paths, tenant=TENANT, workspace=name, purpose=PURPOSE) for name in names}
        for name, query in warm:  # matrices, caches, the model
            value_of(engine, bindings[name], "engram_memory_search", {"query": query, "purpose_ref": PURPOSE})
        for name, query in queries:
            arguments = {"query": query, "purpose_ref": PURPOSE, "limit": 10}
            searches.append(timed(value_of, engine, bindings[name], "engram_memory_search", arguments))
        for name, record_id in lookups:
            arguments = {"record_id": record_id, "purpose_ref": PURPOSE}
            gets.append(timed(value_of, engine, bindings[name], "engram_memory_get", arguments))
    with floor_query(paths) as floor:
        for name, query in warm:
            floor(Scope(TENANT, name), query)
        for name, query in queries:
            floors.append(timed(floor, Scope(TENANT, name), query))
    return {"search": searches, "get": gets, "floor": floors}


def over_stdio(
    paths: HostPaths, corpus: Corpus, stored: Stored, ops: int, semantic: bool, in_flight: int
) -> dict[str, Any]:
    """capture+admission and search through the SDK's client and a real `serve` process.

    Writes are measured as one agent making one call at a time (the latency of a pair), then as the
    session's throughput with 1, 4, 8, 16 and `in_flight` pairs outstanding at once, as an agent's
    parallel tool calls or a host's several agents send them (the server groups what queues up into
    one commit). Searches are timed once the server has embedded those writes (vectors_settled).
    """
    from mcp import Client, StdioServerParameters

    name = sorted(stored.ids)[0]
    token = bench_issued(paths, tenant=TENANT, workspace=name, purpose=PURPOSE, session="bench-stdio").token
    env = {"ENGRAM_BINDING": token, **({} if semantic else {"ENGRAM_EMBEDDING_MODEL": "off"})}
    if "PYTHONPATH" in os.environ:  # a run of another checkout's code (an A/B) must serve that code too
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "engram_memory", "serve", "--home", str(paths.home)], env=env
    )
    pick = random.Random(SEED + 2)
    notes = stored.notes[name]
    writes: list[float] = []
    searches: list[float] = []
    throughput: dict[int, float] = {}

    async def measure() -> None:
        async with Client(params) as client:

            async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
                result = await client.call_tool(tool, arguments)
                envelope = result.structured_content
                if not isinstance(envelope, dict) or not envelope.get("ok"):
                    raise SystemExit(f"{tool} over stdio failed: {envelope}")
                value: dict[str, Any] = envelope["output"]["value"]
                return value

            async def write(label: str, n: int, note: str) -> None:
                arguments = capture_arguments(note, f"{label}-{RUN}-capture-{n:09d}", 1_800_000_000_000 + n)
                captured = await call("engram_memory_capture", arguments)
                admission = {
                    "candidate_id": captured["candidate_id"],
                    "idempotency_key": f"{label}-{RUN}-admit-{n:09d}",
                }
                await call("engram_memory_request_admission", admission)

            for n in range(ops):
                note = corpus.note()
                started = time.perf_counter()
                await write("stdio", n, note)
                writes.append((time.perf_counter() - started) * 1000)

            for width in sorted({1, 4, 8, 16, in_flight}):
                parallel_notes = [corpus.note() for _ in range(ops)]

                async def agent(first: int, width: int = width, notes: list[str] = parallel_notes) -> None:
                    for n in range(first, ops, width):
                        await write(f"stdio-{width}-in-flight", n, notes[n])

                started = time.perf_counter()
                async with anyio.create_task_group() as group:
                    for first in range(width):
                        group.start_soon(agent, first)
                throughput[width] = ops / (time.perf_counter() - started)

            await anyio.to_thread.run_sync(vectors_settled, paths, Scope(TENANT, name), semantic)
            for _ in range(WARM_QUERIES):
                await call("engram_memory_search", {"query": corpus.query(pick.choice(notes)), "purpose_ref": PURPOSE})
            for _ in range(ops):
                arguments = {"query": corpus.query(pick.choice(notes)), "purpose_ref": PURPOSE, "limit": 10}
                started = time.perf_counter()
                await call("engram_memory_search", arguments)
                searches.append((time.perf_counter() - started) * 1000)

    anyio.run(measure)
    return {"write": writes, "search": searches, "throughput": throughput}


def served_figures(
    paths: HostPaths, corpus: Corpus, stored: Stored, options: argparse.Namespace, semantic: bool
) -> dict[str, Any]:
    """The `serve --http` measurements (bench/scale_server.py), as this benchmark's JSON keys."""
    from scale_server import Load, over_http

    name = sorted(stored.ids)[0]
    pick = random.Random(SEED + 3)
    load = Load(
        tenant=TENANT,
        workspace=name,
        purpose=PURPOSE,
        record_ids=stored.ids[name],
        queries=[corpus.query(pick.choice(stored.notes[name])) for _ in range(options.ops)],
        warm_queries=[corpus.query(pick.choice(stored.notes[name])) for _ in range(WARM_QUERIES)],
        storm_queries=[corpus.query(pick.choice(stored.notes[name])) for _ in range(options.ops)],
        notes=corpus.note,
        capture_arguments=capture_arguments,
        processes=options.processes,
        clients=options.clients,
        seconds=options.aggregate_seconds,
        forgets=options.forgets,
        semantic=semantic,
        load_client=options.load_client,
    )
    figures = over_http(paths, load)
    out: dict[str, Any] = {
        "http_processes": options.processes,
        "aggregate_clients": options.clients,
        "aggregate_load_client": options.load_client,
    }
    out["http_start_s"] = round(figures["http_start_s"], 1)
    peak = figures["server_peak_rss_mb"]
    out["server_peak_rss_mb"] = None if peak is None else round(peak, 1)
    for label, q in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99)):
        out[f"http_search_{label}_ms"] = round(percentile(figures["http_search"], q), 2)
    out["aggregate_capture_admit_per_s"] = round(figures["aggregate_pairs"] / figures["aggregate_s"], 1)
    out["aggregate_check"] = figures["aggregate_check"]
    out["forgets"] = len(figures["forget"])
    out["forget_p50_ms"] = round(percentile(figures["forget"], 0.50), 2)
    out["forget_p95_ms"] = round(percentile(figures["forget"], 0.95), 2)
    out["storm_search_p95_ms"] = round(percentile(figures["storm_search"], 0.95), 2)
    out["storm_search_p95_ratio"] = round(out["storm_search_p95_ms"] / out["http_search_p95_ms"], 2)
    return out


def live_figures(
    paths: HostPaths, corpus: Corpus, stored: Stored, options: argparse.Namespace, semantic: bool
) -> dict[str, Any]:
    """Search while `--writers` other serve processes write into the same workspace (bench/live_writes.py)."""
    from live_writes import LiveLoad, measure

    name = sorted(stored.ids)[0]
    pick = random.Random(SEED + 4)
    load = LiveLoad(
        tenant=TENANT,
        workspace=name,
        purpose=PURPOSE,
        warm_queries=[corpus.query(pick.choice(stored.notes[name])) for _ in range(WARM_QUERIES)],
        queries=[corpus.query(pick.choice(stored.notes[name])) for _ in range(options.ops)],
        busy_queries=[corpus.query(pick.choice(stored.notes[name])) for _ in range(options.ops)],
        notes=corpus.note,
        capture_arguments=capture_arguments,
        writers=options.writers,
        rate=options.write_rate,
        semantic=semantic,
        settled=lambda: vectors_settled(paths, Scope(TENANT, name), semantic),
    )
    return measure(paths, load)


KEPT_IMPORT = "scale-import.json"


def _import_key(options: argparse.Namespace) -> dict[str, Any]:
    """What must match for a kept home's import to stand for this run's."""
    return {
        "records": options.records,
        "workspaces": options.workspaces,
        "store": options.store,
        "channels": options.channels,
        "batch": options.batch,
        "seed": SEED,
    }


@contextmanager
def bench_home(options: argparse.Namespace) -> Iterator[HostPaths]:
    """A throwaway home, or `--home` kept for the next run."""
    if options.home is not None:
        yield HostPaths(home=options.home.resolve())
        return
    with tempfile.TemporaryDirectory(prefix="engram-scale-") as scratch:
        yield HostPaths(home=Path(scratch) / "home")


def kept_import(paths: HostPaths, corpus: Corpus, options: argparse.Namespace) -> tuple[Stored, float] | None:
    """The import a kept home already holds (with the corpus' generator where the import left it), or
    None when the home holds none or another one."""
    marker = paths.home / KEPT_IMPORT
    if not marker.exists():
        return None
    kept = json.loads(marker.read_text(encoding="utf-8"))
    if kept["key"] != _import_key(options):
        raise SystemExit(f"{paths.home} holds another import ({kept['key']}); give another --home")
    corpus.restore(kept["corpus_state"])
    print(f"  measuring the import kept in {paths.home}", file=sys.stderr, flush=True)
    return Stored(ids=kept["ids"], notes=kept["notes"]), float(kept["ingest_s"])


def keep_import(paths: HostPaths, corpus: Corpus, options: argparse.Namespace, stored: Stored, seconds: float) -> None:
    kept = {
        "key": _import_key(options),
        "ingest_s": seconds,
        "corpus_state": corpus.state(),
        "ids": stored.ids,
        "notes": stored.notes,
    }
    (paths.home / KEPT_IMPORT).write_text(json.dumps(kept), encoding="utf-8")


def forget_kept(paths: HostPaths, stored: Stored, options: argparse.Namespace) -> None:
    """Drops what the forget storm forgot from the kept import: a home measured again must neither get
    nor forget them."""
    from scale_server import doomed_ids

    name = sorted(stored.ids)[0]
    gone = set(doomed_ids(stored.ids[name], options.forgets))
    kept = json.loads((paths.home / KEPT_IMPORT).read_text(encoding="utf-8"))
    pairs = [(i, n) for i, n in zip(kept["ids"][name], kept["notes"][name], strict=True) if i not in gone]
    kept["ids"][name], kept["notes"][name] = [i for i, _ in pairs], [n for _, n in pairs]
    (paths.home / KEPT_IMPORT).write_text(json.dumps(kept), encoding="utf-8")
    stored.ids[name], stored.notes[name] = kept["ids"][name], kept["notes"][name]


def run(options: argparse.Namespace) -> dict[str, Any]:
    corpus = Corpus(options.corpus)
    semantic = options.channels == "hybrid"
    with bench_home(options) as paths:
        kept = kept_import(paths, corpus, options) if options.home is not None else None
        if kept is None:
            if options.store == "sqlite":
                init_home(paths)
            else:
                init_home(paths, options.store, app_role=options.app_role, vault=options.vault)
            stored, ingest_s = ingest(paths, corpus, options.records, options.workspaces, semantic, options.batch)
            if options.home is not None:
                keep_import(paths, corpus, options, stored, ingest_s)
        else:
            stored, ingest_s = kept
            share_bases_of(paths, semantic, sorted(stored.ids))
        rss_after_ingest = peak_rss_mb()
        if options.import_only:
            return {
                "records": sum(len(ids) for ids in stored.ids.values()),
                "ingest_s": round(ingest_s, 1),
                "capture_admit_per_s": round(options.records / ingest_s, 1),
                "peak_rss_mb": round(rss_after_ingest, 1),
                "db_mb": db_mb(paths),
            }
        recall = graph_recall(paths, corpus, stored) if semantic else {}
        local = in_process(paths, corpus, stored, options.ops, semantic)
        calls = per_call_writes(paths, corpus, stored, options.ops, semantic)
        remote = {} if options.no_stdio else over_stdio(paths, corpus, stored, options.ops, semantic, options.in_flight)
        served = {} if options.no_http else served_figures(paths, corpus, stored, options, semantic)
        if served and options.home is not None:
            forget_kept(paths, stored, options)
        live = {} if not options.writers else live_figures(paths, corpus, stored, options, semantic)
        size = db_mb(paths)
    result: dict[str, Any] = {
        "records": sum(len(ids) for ids in stored.ids.values()),
        "workspaces": options.workspaces,
        "store": "sqlite" if options.store == "sqlite" else "postgresql",
        "channels": options.channels,
        "ingest_s": round(ingest_s, 1),
        "import_batch": options.batch,
        "capture_admit_per_s": round(options.records / ingest_s, 1),
        "capture_admit_per_call_per_s": round(1000 / statistics.fmean(calls), 1),
        "capture_admit_per_call_p95_ms": round(percentile(calls, 0.95), 2),
        "mcp_capture_admit_per_s": round(remote["throughput"][options.in_flight], 1) if remote else None,
        "mcp_in_flight": options.in_flight,
        "mcp_capture_admit_per_s_by_in_flight": (
            {str(width): round(rate, 1) for width, rate in remote["throughput"].items()} if remote else None
        ),
        "mcp_capture_admit_one_at_a_time_per_s": round(1000 / statistics.fmean(remote["write"]), 1) if remote else None,
        "mcp_capture_admit_p50_ms": round(percentile(remote["write"], 0.50), 2) if remote else None,
        "mcp_capture_admit_p95_ms": round(percentile(remote["write"], 0.95), 2) if remote else None,
    }
    for key, values in (("search", local["search"]), ("get", local["get"]), ("floor", local["floor"])):
        for label, q in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99)):
            result[f"{key}_{label}_ms"] = round(percentile(values, q), 2)
    if remote:
        for label, q in (("p50", 0.50), ("p95", 0.95), ("p99", 0.99)):
            result[f"mcp_search_{label}_ms"] = round(percentile(remote["search"], q), 2)
    else:
        result["mcp_search_p95_ms"] = None
    result["floor_ratio_p95"] = round(result["search_p95_ms"] / result["floor_p95_ms"], 2)
    result.update(recall)
    result.update(served)
    result.update(live)
    result["peak_rss_mb"] = round(max(rss_after_ingest, peak_rss_mb()), 1)
    result["db_mb"] = size
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--workspaces", type=int, default=1)
    parser.add_argument("--store", default="sqlite", help="sqlite, or a postgresql:// URL of an empty database")
    parser.add_argument(
        "--app-role", help="with --store postgresql://…: the runtime role `serve` answers agent calls as"
    )
    parser.add_argument(
        "--vault", help="with --store postgresql://…: a postgresql:// URL of an empty database for the key vault"
    )
    parser.add_argument("--channels", choices=["lexical", "hybrid"], default="lexical")
    parser.add_argument(
        "--batch", type=int, default=5000, help="captures+admissions per import commit (1: one call at a time)"
    )
    parser.add_argument("--ops", type=int, default=1000, help="operations per measurement (at least 1,000)")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="a folder of LoCoMo-format files")
    parser.add_argument("--no-stdio", action="store_true", help="skip the MCP stdio measurements")
    parser.add_argument(
        "--in-flight", type=int, default=16, help="capture+admission pairs outstanding at once for the MCP throughput"
    )
    parser.add_argument("--no-http", action="store_true", help="skip the `serve --http` measurements")
    parser.add_argument("--processes", type=int, default=2, help="`serve --http` processes for the HTTP figures")
    parser.add_argument("--clients", type=int, default=8, help="agents (one tenant each) of the aggregate writes")
    parser.add_argument("--aggregate-seconds", type=float, default=30.0, help="how long the aggregate writes run")
    parser.add_argument(
        "--load-client",
        choices=["raw", "sdk"],
        default="raw",
        help="the aggregate writers' MCP client: the lean one of bench/raw_mcp.py, or the SDK's",
    )
    parser.add_argument("--forgets", type=int, default=200, help="records the forget storm forgets")
    parser.add_argument(
        "--writers", type=int, default=0, help="live writes: other serve processes writing while one agent searches"
    )
    parser.add_argument(
        "--write-rate", type=float, default=10.0, help="live writes: capture+admission pairs a second, all writers"
    )
    parser.add_argument(
        "--home",
        type=Path,
        help="keep the store in this home; a home that holds this benchmark's import of the same records is"
        " measured again without importing (the measurements' own writes stay in it)",
    )
    parser.add_argument("--import-only", action="store_true", help="import (into --home) and report only that")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--results", type=Path, help="also append the JSON object as a line to this file")
    options = parser.parse_args(argv)
    if options.records < 1 or options.workspaces < 1 or options.workspaces > options.records:
        parser.error("--records must be at least 1 and at least --workspaces")
    if options.processes < 1 or options.clients < 1 or options.forgets < 1 or options.aggregate_seconds <= 0:
        parser.error("--processes, --clients, --forgets and --aggregate-seconds must be positive")
    if options.in_flight < 1:
        parser.error("--in-flight must be at least 1")
    if options.writers < 0 or options.write_rate <= 0:
        parser.error("--writers must be 0 or more and --write-rate positive")
    if options.import_only and options.home is None:
        parser.error("--import-only needs --home")
    if options.ops < 1000:
        parser.error("--ops must be at least 1,000")
    if options.store != "sqlite" and not options.store.startswith("postgresql://"):
        parser.error("--store is sqlite or a postgresql:// URL")
    if (
        options.store.startswith("postgresql://")
        and not (options.no_stdio and options.no_http)
        and not options.app_role
    ):
        parser.error("--app-role is needed for the server measurements on PostgreSQL (or --no-stdio --no-http)")
    result = run(options)
    if options.results is not None:
        with options.results.open("a", encoding="utf-8") as sink:
            sink.write(json.dumps(result) + "\n")
    if options.json:
        print(json.dumps(result))
    else:
        width = max(len(key) for key in result)
        print("\n".join(f"{key.ljust(width)}  {value}" for key, value in result.items()))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
