"""Reading a sealed body back: the store's ciphertext, the vault's key, one answer when either is gone."""

from __future__ import annotations

import json
from typing import Any

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.deps import Deps
from engram_memory.engine.ports.store import Scope, StoreTx
from engram_memory.engine.sealing.seal import open_sealed


def read_body(deps: Deps, tx: StoreTx, scope: Scope, owner_id: str, kind: str) -> bytes:
    """The plaintext of a candidate or record body. Raises ContractError BLOB_MISSING: never a guess."""
    sealed = tx.get_body(scope, owner_id)
    if sealed is None:
        raise ContractError(ErrorCode.BLOB_MISSING)
    return open_sealed(deps.keyring, deps.vault, scope, owner_id, kind, sealed)


def read_payload(deps: Deps, tx: StoreTx, scope: Scope, owner_id: str, kind: str) -> dict[str, Any]:
    """The stored payload (with its scope_ref and resolved retention) of a body."""
    payload: dict[str, Any] = json.loads(read_body(deps, tx, scope, owner_id, kind))["payload"]
    return payload
