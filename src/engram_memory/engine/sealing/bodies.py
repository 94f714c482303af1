"""Reading a sealed body back: the store's ciphertext, the vault's key, one answer when either is gone."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.engine.deps import Deps
from engram_memory.engine.ports.agent_tx import BodiesTx
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.sealing.seal import open_sealed, open_with_key


def read_body(deps: Deps, tx: BodiesTx, scope: Scope, owner_id: str, kind: str) -> bytes:
    """The plaintext of a candidate or record body. Raises ContractError BLOB_MISSING: never a guess."""
    sealed = tx.get_body(scope, owner_id)
    if sealed is None:
        raise ContractError(ErrorCode.BLOB_MISSING)
    return open_sealed(deps.keyring, deps.vault, scope, owner_id, kind, sealed)


def read_payload(deps: Deps, tx: BodiesTx, scope: Scope, owner_id: str, kind: str) -> dict[str, Any]:
    """The stored payload (with its scope_ref and resolved retention) of a body."""
    payload: dict[str, Any] = json.loads(read_body(deps, tx, scope, owner_id, kind))["payload"]
    return payload


def read_payloads(
    deps: Deps, tx: BodiesTx, scope: Scope, owner_ids: Sequence[str], kind: str
) -> dict[str, dict[str, Any]]:
    """The payloads of several bodies of one scope: one read of the bodies and one of their keys, however
    many there are (a page of search hits on a server store is round trips, not work). Raises
    ContractError BLOB_MISSING when any body or key is gone."""
    bodies = tx.get_bodies(scope, owner_ids)
    keys = deps.vault.get_many(scope, owner_ids)
    payloads: dict[str, dict[str, Any]] = {}
    for owner_id in owner_ids:
        sealed, key = bodies.get(owner_id), keys.get(owner_id)
        if sealed is None or key is None:
            raise ContractError(ErrorCode.BLOB_MISSING)
        plaintext = open_with_key(deps.keyring, key, scope, owner_id, kind, sealed)
        payloads[owner_id] = json.loads(plaintext)["payload"]
    return payloads
