"""Both stores rank alike: the same memories, captured through the engine into a SQLite home and a PostgreSQL
home, give the same candidates, the same term counts and statistics, and the same search results and scores.

Candidate generation differs (FTS5's bm25 and PostgreSQL's ts_rank order the pool), so the pool is kept
larger than any match set here: BM25F re-scoring in the engine then decides every order, on both stores.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engram_memory.engine.deps import Deps
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.recall.text import query_terms
from engram_memory.host.compose import open_store, open_vault
from engram_memory.host.keys.files import load_keyring, load_mac_keys
from engram_memory.host.policy_file import FilePolicySource
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.homes import bind, make_home
from tests.support.inprocess import InProcessAgent
from tests.support.postgres import PostgresCluster, make_postgres_home

NOW_MS = 1_750_000_000_000
MEMORIES = [
    ("Blue-green deployments switch traffic after the health check passes", None, "doc:deploy"),
    ("Canary releases send five percent of traffic to the new version first", "traffic shaping notes", "doc:deploy"),
    ("The health check endpoint answers on /healthz with a JSON body", None, "doc:api"),
    ("Rollbacks restore the previous version when the error budget is spent", "error budget policy", "doc:sre"),
    ("Database migrations run before the new version receives traffic", "deploy ordering", "doc:db"),
    ("Feature flags decouple deploying from releasing", None, "doc:flags"),
    ("The staging cluster mirrors production traffic for an hour", "traffic replay", "doc:staging"),
    ("Health checks must not call downstream services", "check isolation", "doc:api"),
    ("Versioned APIs keep the previous version for ninety days", None, "doc:api"),
    ("Traffic shifting uses weighted routes in the load balancer", "weights", "doc:lb"),
    ("Error budgets are reviewed every sprint by the SRE team", None, "doc:sre"),
    ("Deploy windows avoid Friday afternoons", "calendar", "doc:deploy"),
    ("東京 region deployments follow the same health check rules", None, "doc:regions"),
    ("Zero-downtime deploys need backward compatible schema changes", "migrations", "doc:db"),
]
QUERIES = [
    "health check",
    "traffic version",
    "error budget",
    "deploy traffic health",
    "previous version rollback",
    "東京 deployments",
    "database schema migrations",
    "nothing matches this",
]


@contextmanager
def _engine(paths: HostPaths) -> Iterator[Engine]:
    """The home's own store and vault, under a clock both homes share (recency is part of every score)."""
    macs = load_mac_keys(paths)
    store, vault = open_store(paths), open_vault(paths)
    try:
        yield Engine(
            Deps(
                store=store,
                keyring=load_keyring(paths),
                vault=vault,
                policies=FilePolicySource(paths.policy),
                clock=ManualClock(NOW_MS),
                cursor_key=macs.cursor,
                audit_key=macs.audit,
            )
        )
    finally:
        vault.close()
        store.close()


def _observe(paths: HostPaths) -> dict[str, object]:
    """Everything ranking reads and returns, with record ids replaced by the memory each one holds."""
    seen: dict[str, object] = {}
    with _engine(paths) as engine:
        agent = InProcessAgent(engine, bind(paths).binding)
        text_of = {}
        for text, context, source in MEMORIES:
            text_of[agent.remember(text, context=context, source_ref=source)] = text
        scope = agent.binding.tenant, agent.binding.workspace
        for query in QUERIES:
            value = agent.search(query, limit=50)
            # Equal scores are ordered by record id, which each home draws at random: compare ties as sets.
            packets = value["records"]
            seen[query] = sorted((-p["score"], text_of[p["record"]["record_id"]]) for p in packets)
            seen[query + " ranks"] = [(p["rank"], p["score"]) for p in packets]
            seen[query + " receipt"] = value["rank_receipt"]["candidate_count"]
            terms = query_terms(query)
            with engine.deps.store.read() as tx:
                here = Scope(*scope)
                pool = tx.lexical_candidates(here, terms, valid_at_ms=NOW_MS, limit=1000)
                seen[query + " pool"] = sorted((text_of[d.record_id], tuple(sorted(d.fields.items()))) for d in pool)
                seen[query + " counts"] = tx.term_doc_counts(here, terms)
                seen[query + " stats"] = tx.index_stats(here)
    return seen


def test_both_stores_give_identical_candidates_counts_and_ranking(
    tmp_path: Path, postgres_cluster: PostgresCluster
) -> None:
    embedded = _observe(make_home(tmp_path / "sqlite-home"))
    server = _observe(make_postgres_home(tmp_path / "postgres-home", postgres_cluster))
    assert embedded == server
    assert embedded["health check"] and embedded["nothing matches this"] == []
    assert len(embedded["traffic version"]) >= 5  # type: ignore[arg-type]
    assert len({score for _, score in embedded["health check ranks"]}) > 1  # type: ignore[attr-defined]
