"""Housekeeping destroys keys the store ended, never keys of owners the store does not know, and walks
the vault a bounded number of pages per run, resuming where it stopped."""

from __future__ import annotations

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.engine.lifecycle import housekeeping
from engram_memory.engine.lifecycle.housekeeping import SWEEP_GRACE_MS, KeySweep
from engram_memory.engine.ports.store import Scope
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.inprocess import InProcessAgent
from tests.support.raw import raw_store, raw_vault

SCOPE = Scope("tenant-a", "workspace-1")


def _leave_key_behind(paths: HostPaths, owner_id: str) -> None:
    """What a crash between the store's commit and the vault's destroy leaves: a key for an ended body."""
    with raw_vault(paths) as vault:
        vault.execute(
            "INSERT INTO data_keys (owner_id, tenant, workspace, kek_id, wrapped, created_at_ms)"
            " VALUES (?, 'tenant-a', 'workspace-1', 'kek', ?, 0)",
            (owner_id, b"\x00"),
        )


def _admitted_with_candidate_keys_left(agent: InProcessAgent, paths: HostPaths, texts: list[str]) -> list[str]:
    """Admits each text (the candidate's body ends, the record's lives on) and leaves the candidate's key
    behind; returns the candidates' ids."""
    ended = []
    for text in texts:
        candidate = agent.capture(text)["candidate_id"]
        agent.admit(candidate)
        _leave_key_behind(paths, candidate)
        ended.append(candidate)
    return ended


def test_sweep_destroys_a_key_whose_body_ended(
    agent: InProcessAgent, steered: Engine, paths: HostPaths, clock: ManualClock
) -> None:
    candidate = agent.capture("A draft whose key destruction was cut short.")["candidate_id"]
    outcome = agent.admit(candidate)
    record_id = outcome["record_id"]
    _leave_key_behind(paths, candidate)
    clock.advance(SWEEP_GRACE_MS + 1)
    assert KeySweep().run(steered.deps) == 1
    assert steered.deps.vault.get(SCOPE, candidate) is None
    assert steered.deps.vault.get(SCOPE, record_id) is not None
    assert agent.get(record_id)["ok"]


def test_sweep_never_touches_keys_of_unknown_owners(
    agent: InProcessAgent, steered: Engine, paths: HostPaths, clock: ManualClock
) -> None:
    record_id = agent.remember("A record whose store will be emptied before a restore.")
    with raw_store(paths) as db:
        db.execute("DELETE FROM records")
        db.execute("DELETE FROM sealed_bodies")
    clock.advance(SWEEP_GRACE_MS + 1)
    assert KeySweep().run(steered.deps) == 0
    assert steered.deps.vault.get(SCOPE, record_id) is not None


def test_sweep_leaves_fresh_keys_alone(agent: InProcessAgent, steered: Engine) -> None:
    agent.remember("Fresh.")
    assert KeySweep().run(steered.deps) == 0


def test_each_run_checks_a_bounded_slice_and_the_next_resumes_after_it(
    agent: InProcessAgent, steered: Engine, paths: HostPaths, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(housekeeping, "SWEEP_PAGE", 2)
    ended = _admitted_with_candidate_keys_left(agent, paths, [f"Draft {n} (서울 초안 {n})." for n in range(5)])
    clock.advance(SWEEP_GRACE_MS + 1)
    keys = len(steered.deps.vault.owners_created_before(clock.now_ms()))
    assert keys == 10  # five leftover candidate keys, five live record keys

    sweep, swept, runs = KeySweep(), [], 0
    while True:
        swept.append(sweep.run(steered.deps, pages=1))
        runs += 1
        if sweep.after:  # nothing past where this run stopped has been touched yet
            assert all(steered.deps.vault.get(SCOPE, owner) is not None for owner in ended if owner > sweep.after)
        else:
            break
    assert runs == 6  # ten keys, two a run, then a run that finds none and ends the pass
    assert sum(swept) == 5
    assert all(steered.deps.vault.get(SCOPE, owner) is None for owner in ended)
    assert KeySweep().run(steered.deps) == 0  # nothing is left for the next pass


def test_a_run_stops_after_its_pages_and_leaves_the_rest_for_later(
    agent: InProcessAgent, steered: Engine, paths: HostPaths, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(housekeeping, "SWEEP_PAGE", 1)
    ended = _admitted_with_candidate_keys_left(agent, paths, [f"Draft {n} 草稿." for n in range(3)])
    clock.advance(SWEEP_GRACE_MS + 1)
    first_page = steered.deps.vault.owners_created_before(clock.now_ms(), limit=2)
    sweep = KeySweep()
    sweep.run(steered.deps, pages=2)
    assert sweep.after == first_page[-1]
    remaining = [owner for owner in ended if steered.deps.vault.get(SCOPE, owner) is not None]
    assert remaining == [owner for owner in ended if owner > first_page[-1]]
    assert remaining  # the slice was bounded: keys after it waited for the next run
