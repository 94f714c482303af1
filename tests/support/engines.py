"""In-process engines over a real home's SQLite file, with the ports a test needs to steer."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from engram_memory.engine.deps import Deps
from engram_memory.engine.engine import Engine
from engram_memory.engine.policy import PolicySource
from engram_memory.engine.ports import Clock
from engram_memory.host.keyfiles import load_keyring, load_mac_keys
from engram_memory.host.policy_file import FilePolicySource
from engram_memory.host.settings import HostPaths
from engram_memory.stores.sqlite.store import SQLiteStore
from engram_memory.stores.sqlite.vault import SQLiteKeyVault


@contextmanager
def steered_engine(
    paths: HostPaths,
    *,
    clock: Clock,
    policies: PolicySource | None = None,
    store: SQLiteStore | None = None,
) -> Iterator[Engine]:
    macs = load_mac_keys(paths)
    own_store = store or SQLiteStore(paths.sqlite_file)
    vault = SQLiteKeyVault(paths.vault_file)
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
            )
        )
    finally:
        vault.close()
        own_store.close()
