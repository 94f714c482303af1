"""Housekeeping destroys keys the store ended, and never keys of owners the store does not know."""

from __future__ import annotations

from engram_memory.engine.engine import Engine
from engram_memory.engine.lifecycle.housekeeping import SWEEP_GRACE_MS, sweep_ended_keys
from engram_memory.engine.ports.store import Scope
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.inprocess import InProcessAgent
from tests.support.raw import raw_store, raw_vault

SCOPE = Scope("tenant-a", "workspace-1")


def test_sweep_destroys_a_key_whose_body_ended(
    agent: InProcessAgent, steered: Engine, paths: HostPaths, clock: ManualClock
) -> None:
    candidate = agent.capture("A draft whose key destruction was cut short.")["candidate_id"]
    outcome = agent.admit(candidate)
    record_id = outcome["record_id"]
    # Simulate the lost post-commit step: put a key back for the ended candidate body.
    with raw_vault(paths) as vault:
        vault.execute(
            "INSERT INTO data_keys (owner_id, tenant, workspace, kek_id, wrapped, created_at_ms)"
            " VALUES (?, 'tenant-a', 'workspace-1', 'kek', ?, 0)",
            (candidate, b"\x00"),
        )
    clock.advance(SWEEP_GRACE_MS + 1)
    assert sweep_ended_keys(steered.deps) == 1
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
    assert sweep_ended_keys(steered.deps) == 0
    assert steered.deps.vault.get(SCOPE, record_id) is not None


def test_sweep_leaves_fresh_keys_alone(agent: InProcessAgent, steered: Engine) -> None:
    agent.remember("Fresh.")
    assert sweep_ended_keys(steered.deps) == 0
