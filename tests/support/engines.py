"""In-process engines over a real home, on whichever store it uses, with the ports a test needs to steer.

The store and the key vault are opened through host/compose, exactly as the host opens them: as the
owner role, or (`runtime=True`) as the role that serves agent calls on PostgreSQL. A test of a fault
that cannot be caused for real injects its own store (tests/support/faults.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from engram_memory.engine.admission.policy import PolicySource
from engram_memory.engine.deps import Deps
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Clock, Store
from engram_memory.engine.recall.indexer import VectorIndexer
from engram_memory.engine.recall.semantic import VectorCache
from engram_memory.host.compose import open_store, open_vault, store_settings, vector_cache
from engram_memory.host.keys.files import load_keyring, load_mac_keys
from engram_memory.host.policy_file import FilePolicySource
from engram_memory.host.settings import HostPaths


@contextmanager
def steered_engine(
    paths: HostPaths,
    *,
    clock: Clock,
    policies: PolicySource | None = None,
    store: Store | None = None,
    runtime: bool = False,
    semantic: bool = True,
    cache: VectorCache | None = None,
) -> Iterator[Engine]:
    """`semantic` as `serve` has it: the installed embedding model's channel, with its indexer beside
    the admissions (False: lexical only); `cache` is that channel's in-memory state, another engine's to
    share it (as when the store changes under a running process), else a new one."""
    macs = load_mac_keys(paths)
    own_store = store or open_store(paths, runtime=runtime)
    try:
        vault = open_vault(paths, runtime=runtime)
    except BaseException:
        own_store.close()
        raise
    cache = (cache or vector_cache()) if semantic else None
    indexer = None if cache is None else VectorIndexer(own_store, cache)
    try:
        yield Engine(
            Deps(
                store=own_store,
                keyring=load_keyring(paths),
                vault=vault,
                policies=policies or FilePolicySource(paths.policy),
                clock=clock,
                cursor_key=macs.cursor,
                audit_key=macs.audit,
                semantic=cache,
                indexer=indexer,
            )
        )
    finally:
        if indexer is not None:
            indexer.close()
        vault.close()
        own_store.close()


@contextmanager
def steered_engines(
    paths: HostPaths, *, clock: Clock, policies: PolicySource | None = None
) -> Iterator[tuple[Engine, Engine]]:
    """(agents, owner), as `serve` pairs them (compose.serving_engines), on one clock the test controls.

    On PostgreSQL agent calls go through the runtime role (row-level security per tenant) and the host's
    work through the owner; on SQLite there is no role to separate and both are the same engine.
    """
    with ExitStack() as stack:
        owner = stack.enter_context(steered_engine(paths, clock=clock, policies=policies))
        if not store_settings(paths).is_postgres:
            yield owner, owner
            return
        agents = stack.enter_context(steered_engine(paths, clock=clock, policies=policies, runtime=True))
        yield agents, owner
