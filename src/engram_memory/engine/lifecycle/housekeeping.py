"""Finishing what a crash may have cut short: data keys whose body the store has already ended.

Keys are destroyed after the store commits; if that step failed, the key outlives its body. Only
owners the store knows are swept — a key whose owner the store has never seen (an emptied store
awaiting a restore, say) is never touched, so housekeeping can never make a restore impossible.
"""

from __future__ import annotations

from engram_memory.engine.deps import Deps

SWEEP_GRACE_MS = 60_000


def sweep_ended_keys(deps: Deps) -> int:
    """Destroys the data keys of ended bodies; returns how many it found."""
    now = deps.clock.now_ms()
    owners = deps.vault.owners_created_before(now - SWEEP_GRACE_MS)
    if not owners:
        return 0
    with deps.store.read() as tx:
        ended = sorted(tx.ended_owners(owners))
    if ended:
        deps.vault.destroy(ended, now)
    return len(ended)
