"""Serving with housekeeping: due records expire and ended keys are swept, at start and on a timer."""

from __future__ import annotations

import json
import time
from pathlib import Path

from engram_memory.contract.instants import format_instant
from engram_memory.engine.lifecycle.housekeeping import SWEEP_GRACE_MS
from engram_memory.host.serve.stdio import housekeep_once
from engram_memory.host.settings import HostPaths
from tests.host.clirun import cli
from tests.support.agents import StdioAgent
from tests.support.clocks import ManualClock
from tests.support.engines import steered_engine
from tests.support.homes import bind, engine_for
from tests.support.inprocess import InProcessAgent
from tests.support.raw import raw_vault


def _state(home: Path, record_id: str) -> str:
    done = cli("records", "show", record_id, "--json", "--home", home)
    assert done.code == 0, done.stderr
    return str(json.loads(done.stdout)["state"])


def test_housekeep_once_expires_due_records_and_sweeps_ended_keys(paths: HostPaths) -> None:
    clock = ManualClock()
    with steered_engine(paths, clock=clock) as engine:
        agent = InProcessAgent(engine, bind(paths, lifetime_s=86_400).binding)
        expires = format_instant(clock.now + 1_000)
        record_id = agent.remember(
            "The freeze ends at noon.", retention={"derivative_rule": "make-ineligible", "expires_at": expires}
        )
        candidate = agent.capture("A draft decided later.")["candidate_id"]
        agent.admit(candidate)
        with raw_vault(paths) as vault:
            vault.execute(
                "INSERT INTO data_keys (owner_id, tenant, workspace, kek_id, wrapped, created_at_ms)"
                " VALUES (?, 'tenant-a', 'workspace-1', 'k', ?, 0)",
                (candidate, b"\x00"),
            )
        assert housekeep_once(engine) == (0, 1)
        clock.advance(SWEEP_GRACE_MS)
        assert housekeep_once(engine) == (1, 0)
        assert housekeep_once(engine) == (0, 0)
    assert _state(paths.home, record_id) == "expired"


def test_serve_expires_due_records_when_it_starts(paths: HostPaths) -> None:
    issued = bind(paths)
    with engine_for(paths) as engine:
        expires = format_instant(int(time.time() * 1000) + 1_500)
        record_id = InProcessAgent(engine, issued.binding).remember(
            "A notice that lapses in a moment.",
            retention={"derivative_rule": "make-ineligible", "expires_at": expires},
        )
    time.sleep(2)
    assert _state(paths.home, record_id) == "accepted_current"
    with StdioAgent(paths.home, issued.token) as agent:
        agent.list_tools()
        deadline = time.time() + 20
        while _state(paths.home, record_id) != "expired" and time.time() < deadline:
            time.sleep(0.2)
    assert _state(paths.home, record_id) == "expired"
