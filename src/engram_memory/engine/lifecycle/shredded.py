"""Settling a restored store against its key vault: a body whose data key was destroyed cannot come back.

A backup taken before a forget, a withdraw or an admission still holds that body; its key is gone from
the vault. The restore ends each such body the way the agent's own call would have: a record becomes
tombstoned (only its payload digest can reach the tombstone guard now), a pending candidate withdrawn,
each by one journal event signed by the host.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engram_memory.contract.states import CandidateState, Operation, RecordState, record_transition
from engram_memory.engine.deps import Deps
from engram_memory.engine.lifecycle.erasure import erase_record
from engram_memory.engine.lifecycle.transitions import candidate_withdrawn, record_transitioned
from engram_memory.engine.mutation import host_actor
from engram_memory.engine.ports.rows import Scope


@dataclass
class Settled:
    """What the settling did to bodies whose keys were destroyed."""

    tombstoned: list[str] = field(default_factory=list)
    withdrawn: list[str] = field(default_factory=list)
    bodies_erased: int = 0
    events: dict[Scope, int] = field(default_factory=dict)


def settle_shredded(deps: Deps, *, decided_by: str, reason_ref: str) -> Settled:
    """Erases every body whose data key the vault's log says was destroyed, journaling each state change."""
    with deps.store.read() as tx:
        owners = tx.sealed_owners()
    shredded = deps.vault.shredded([owner.owner_id for owner in owners])
    settled = Settled()
    if not shredded:
        return settled
    actor, now_ms = host_actor(decided_by), deps.clock.now_ms()
    with deps.store.write() as tx:
        for owner in owners:
            if owner.owner_id not in shredded:
                continue
            scope = owner.scope
            record = tx.get_record(scope, owner.owner_id) if owner.kind == "record" else None
            candidate = tx.get_candidate(scope, owner.owner_id) if owner.kind == "candidate" else None
            if record is not None and record.state != RecordState.TOMBSTONED.value:
                to_state = record_transition(Operation.TOMBSTONE, RecordState(record.state))
                erase_record(deps, tx, record, now_ms)  # the key is gone: the digest is all the guard keeps
                record_transitioned(
                    tx, record, Operation.TOMBSTONE, to_state, actor=actor, at_ms=now_ms, reason_ref=reason_ref
                )
                settled.tombstoned.append(record.record_id)
            elif candidate is not None and candidate.state == CandidateState.PENDING.value:
                tx.destroy_body(scope, owner.owner_id)
                candidate_withdrawn(tx, candidate, actor=actor, at_ms=now_ms, reason_ref=reason_ref)
                settled.withdrawn.append(candidate.candidate_id)
            else:
                tx.destroy_body(scope, owner.owner_id)
                settled.bodies_erased += 1
                continue
            settled.bodies_erased += 1
            settled.events[scope] = settled.events.get(scope, 0) + 1
    return settled
