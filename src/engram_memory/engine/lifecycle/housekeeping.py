"""Finishing what a crash may have cut short: data keys whose body the store has already ended.

Keys are destroyed after the store commits; if that step failed, the key outlives its body. Only
owners the store knows are swept — a key whose owner the store has never seen (an emptied store
awaiting a restore, say) is never touched, so housekeeping can never make a restore impossible.

Every live memory has a key, so a pass over the whole vault grows with the store. `serve` therefore
walks the vault a bounded number of pages per housekeeping run (`KeySweep`), resuming where it
stopped: a run costs the same at a thousand memories and at a million, and a leftover key is found
within `ceil(keys / (SWEEP_PAGE * SWEEP_PAGES_PER_RUN))` runs. The normal path destroys keys at once;
only a crash between the store's commit and the vault's destroy leaves one for the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

from engram_memory.engine.deps import Deps

SWEEP_GRACE_MS = 60_000
SWEEP_PAGE = 1_000  # keys read from the vault and checked against the store at once
SWEEP_PAGES_PER_RUN = 10  # 10,000 keys a housekeeping run: a full pass per 10 runs at 100,000 memories


@dataclass
class KeySweep:
    """Where the bounded sweep resumes: the last owner id it checked ("" starts a new pass)."""

    after: str = ""

    def run(self, deps: Deps, pages: int = SWEEP_PAGES_PER_RUN) -> int:
        """Checks up to `pages` pages of keys after the cursor; returns how many ended keys it destroyed.

        The cursor moves only past pages that were fully handled, so a failure re-checks the page."""
        swept = 0
        for _ in range(pages):
            owners = deps.vault.owners_created_before(
                deps.clock.now_ms() - SWEEP_GRACE_MS, after=self.after, limit=SWEEP_PAGE
            )
            swept += _destroy_ended(deps, owners)
            if len(owners) < SWEEP_PAGE:
                self.after = ""  # the pass is complete; the next run starts another
                break
            self.after = owners[-1]
        return swept


def _destroy_ended(deps: Deps, owners: list[str]) -> int:
    if not owners:
        return 0
    with deps.store.read() as tx:
        ended = sorted(tx.ended_owners(owners))
    if ended:
        deps.vault.destroy(ended, deps.clock.now_ms())
    return len(ended)
