"""A search's or a get's snapshot of one scope, which a store may take on a replica: run again when the
replica fails under it (the store then sends the next read of the scope elsewhere)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.deps import Deps
from engram_memory.engine.mutation import MAX_ATTEMPTS
from engram_memory.engine.ports.store import Scope, StoreTx, TransientConflict

T = TypeVar("T")


def read_scope(deps: Deps, scope: Scope, body: Callable[[StoreTx], T]) -> T:
    """`body` on a snapshot of `scope`. Raises what `body` raises; STORE_UNAVAILABLE after MAX_ATTEMPTS
    failed replicas."""
    for _attempt in range(MAX_ATTEMPTS):
        try:
            with deps.store.read(scope=scope) as tx:
                return body(tx)
        except TransientConflict:
            continue
    raise ContractError(ErrorCode.STORE_UNAVAILABLE)
