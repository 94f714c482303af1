"""The body checks of verify: each live candidate and record keeps its sealed body, no ended one does, and
(in a full run) every live body opens with its data key."""

from __future__ import annotations

import json
from collections.abc import Mapping

from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.states import CandidateState, RecordState
from engram_memory.engine.deps import Deps
from engram_memory.engine.ports.agent_tx import BodiesTx
from engram_memory.engine.ports.operations import CandidateStateRow
from engram_memory.engine.ports.store import Scope
from engram_memory.engine.projection import index_fields
from engram_memory.engine.sealing.seal import open_sealed
from engram_memory.engine.verify.report import Checks, VerifyReport, scope_name

_PENDING = CandidateState.PENDING.value
_TOMBSTONED = RecordState.TOMBSTONED.value


def check_bodies(
    checks: Checks, candidates: list[CandidateStateRow], records: Mapping[str, str], bodies: set[str]
) -> dict[str, str]:
    """Every live owner has its body and no ended one keeps one. Returns live owners -> body kind."""
    live: dict[str, str] = {row.candidate_id: "candidate" for row in candidates if row.state == _PENDING}
    live.update((record_id, "record") for record_id, state in records.items() if state != _TOMBSTONED)
    ended = {row.candidate_id: f"{row.state} candidate" for row in candidates if row.state != _PENDING}
    ended.update((record_id, "tombstoned record") for record_id, state in records.items() if state == _TOMBSTONED)
    name = scope_name(checks.scope)
    for owner in sorted(set(live) - bodies):
        checks.add("bodies", ErrorCode.BLOB_MISSING, owner, f"the body of {live[owner]} {owner} in {name} is missing")
    for owner in sorted(bodies - set(live)):
        what = ended.get(owner)
        if what is None:
            detail = f"a body is left for {owner}, which no candidate or record of {name} names"
        else:
            detail = f"a body is left for the {what} {owner} in {name}"
        checks.add("leftover", ErrorCode.JOURNAL_CORRUPT, owner, detail)
    return live


def open_bodies(
    deps: Deps,
    tx: BodiesTx,
    scope: Scope,
    live: Mapping[str, str],
    bodies: set[str],
    report: VerifyReport,
    suspects: list[tuple[str, str]],
) -> dict[str, dict[str, str]]:
    """Opens every live body; returns the index fields of each record that opened. Failures become suspects."""
    fields: dict[str, dict[str, str]] = {}
    for owner in sorted(set(live) & bodies):
        kind = live[owner]
        sealed = tx.get_body(scope, owner)
        if sealed is None:
            continue
        if deps.vault.get(scope, owner) is None:
            suspects.append((owner, f"the data key of {kind} {owner} in {scope_name(scope)} is missing from the vault"))
            continue
        try:
            plaintext = open_sealed(deps.keyring, deps.vault, scope, owner, kind, sealed)
        except ContractError:
            suspects.append(
                (owner, f"the body of {kind} {owner} in {scope_name(scope)} does not open with its data key")
            )
            continue
        report.opened += 1
        if kind == "record":
            try:
                fields[owner] = index_fields(json.loads(plaintext)["payload"])
            except (ValueError, KeyError, TypeError):
                suspects.append((owner, f"the body of record {owner} in {scope_name(scope)} holds no stored payload"))
    return fields


def confirm_suspects(deps: Deps, scope: Scope, checks: Checks, suspects: list[tuple[str, str]]) -> None:
    """A body read in the snapshot may have ended since, its key destroyed after that commit: not a problem."""
    try:
        with deps.store.read() as tx:
            still = tx.body_owners(scope)
    except ContractError:
        still = {owner for owner, _ in suspects}
    for owner, detail in suspects:
        if owner in still:
            checks.add("keys", ErrorCode.BLOB_MISSING, owner, detail)
