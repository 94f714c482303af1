"""Reconciliation families at admission: what a newly accepted memory does to the current memories of its
scope that share a family with it (the policy's `family_rules`, issue 20).

`supersede`: the older current members become historical in the same transaction as the acceptance, each
by one journaled transition naming both records and the decision's receipt; a member's validity is closed
where its successor's starts (the successor's `valid_time.t`), which is what an as-of read goes by. A
current member that starts later than the candidate is not displaced by older news: the candidate goes to
a person instead. `adjudicate`: the candidate goes to a person, who sees it beside the current members.
`coexist`: nothing.

Families are stored as keyed digests of their refs in the record's scope, never as the refs, with a key
derived from the host's MAC secret, like the tombstone guard's.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from engram_memory.contract.states import Operation, RecordState
from engram_memory.engine.admission.policy import AdmissionPolicy
from engram_memory.engine.lifecycle.transitions import record_transitioned
from engram_memory.engine.ports.agent_tx import FamiliesTx, RecordsTx
from engram_memory.engine.ports.store import JournalEvent, RecordRow, Scope, StoreTx

_KEY_DOMAIN = b"engram-memory/reconciliation-family/v1"
_CURRENT = RecordState.ACCEPTED_CURRENT.value


@functools.cache
def _family_secret(mac_secret: bytes) -> bytes:
    return hmac.new(mac_secret, _KEY_DOMAIN, hashlib.sha256).digest()


def family_key(mac_secret: bytes, scope: Scope, family_ref: str) -> str:
    message = f"{scope.tenant}\x00{scope.workspace}\x00{family_ref}".encode("utf-8", errors="surrogatepass")
    return "fam1:" + hmac.new(_family_secret(mac_secret), message, hashlib.sha256).hexdigest()


def family_refs(payload: Mapping[str, Any]) -> list[str]:
    reconciliation = payload.get("reconciliation") or {}
    return list(reconciliation.get("family_refs", []))


def family_keys(mac_secret: bytes, scope: Scope, payload: Mapping[str, Any]) -> list[str]:
    return [family_key(mac_secret, scope, ref) for ref in family_refs(payload)]


@dataclass(frozen=True, slots=True)
class FamilyPlan:
    """What the candidate's families say: the current records it would supersede, and the current records
    a person must weigh it against (which send it to review, and are never superseded without one)."""

    supersedes: tuple[str, ...] = ()
    weigh_against: tuple[str, ...] = ()


def _unique(ids: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(ids))


class FamilyTx(RecordsTx, FamiliesTx, Protocol):
    """A family's members as records."""


def current_members(
    mac_secret: bytes, tx: FamilyTx, scope: Scope, payload: Mapping[str, Any]
) -> list[tuple[str, RecordRow]]:
    """(family ref, record) for every current record of the scope in one of the payload's families."""
    refs = family_refs(payload)
    if not refs:
        return []
    keys = {ref: family_key(mac_secret, scope, ref) for ref in refs}
    members = tx.family_records(scope, list(keys.values()))
    rows = tx.get_records(scope, sorted({record_id for ids in members.values() for record_id in ids}))
    return [
        (ref, rows[record_id])
        for ref, key in keys.items()
        for record_id in members[key]
        if record_id in rows and rows[record_id].state == _CURRENT
    ]


def plan_families(
    mac_secret: bytes, tx: FamilyTx, scope: Scope, policy: AdmissionPolicy, payload: Mapping[str, Any]
) -> FamilyPlan:
    return plan_of(policy, payload, current_members(mac_secret, tx, scope, payload))


def plan_of(
    policy: AdmissionPolicy, payload: Mapping[str, Any], members: Iterable[tuple[str, RecordRow]]
) -> FamilyPlan:
    """The plan for a payload given its families' current members (as `current_members` finds them)."""
    starts = payload["valid_time"]["t"]
    supersedes: list[str] = []
    weigh: list[str] = []
    for ref, record in members:
        mode = policy.family_mode(ref)
        if mode == "adjudicate" or (mode == "supersede" and record.valid_from_ms > starts):
            weigh.append(record.record_id)
        elif mode == "supersede":
            supersedes.append(record.record_id)
    weighed = _unique(weigh)
    return FamilyPlan(tuple(r for r in _unique(supersedes) if r not in weighed), weighed)


def supersede_members(
    tx: StoreTx,
    scope: Scope,
    record_ids: Sequence[str],
    successor_id: str,
    *,
    actor: Mapping[str, str],
    at_ms: int,
    decision_receipt_digest: str,
) -> list[JournalEvent]:
    """accepted_current -> historical for each record, superseded by `successor_id`; leaves the index.

    A record that is no longer current (another admission of this transaction took it) is skipped."""
    events = []
    rows = tx.get_records(scope, list(record_ids))
    for record_id in record_ids:
        record = rows.get(record_id)
        if record is None or record.state != _CURRENT:
            continue
        tx.unindex_record(scope, record.record_id)
        extra = {"superseded_by": successor_id, "decision_receipt_digest": decision_receipt_digest}
        events.append(
            record_transitioned(
                tx, record, Operation.SUPERSEDE, RecordState.HISTORICAL, actor=actor, at_ms=at_ms, extra=extra
            )
        )
        tx.set_superseded_by(scope, record.record_id, successor_id)
    return events
