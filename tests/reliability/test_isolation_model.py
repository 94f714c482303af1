"""Isolation, model-based (issue 14): random sequences of all six tools across tenants, workspaces and
principals, each answer compared with a plain-Python model of what that binding may see.

Every sequence gets fresh tenants on one shared engine (so the engine's caches and indexes carry
state from sequence to sequence, as a long-lived server's do), on either store: on PostgreSQL the
agents' calls go through the runtime role, under row-level security per tenant, and the host's
approvals through the owner, as `serve` pairs them. Four bindings: two tenants, two
workspaces in the first, two principals in one scope. The model knows which scope owns every
candidate and record; any id used from another scope must be NOT_FOUND, byte for byte the same
answer as an id that never existed, and search must never return another scope's record.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, rule

from engram_memory.contract.binding import Binding
from engram_memory.engine.engine import Engine
from engram_memory.host.compose import open_engine
from engram_memory.host.settings import HostPaths
from tests.reliability.scale import amount, report
from tests.support.homes import STORES, bind, home_on
from tests.support.payloads import PURPOSE, capture_args, unique_key

WORDS = ["osprey", "heron", "falcon", "quartz", "meadow", "lantern", "orbit", "cobalt"]
_sequences = itertools.count(1)
_steps = itertools.count(1)
_foreign = itertools.count(1)


@dataclass
class Scope:
    candidates: dict[str, str] = field(default_factory=dict)  # id -> pending | accepted | withdrawn
    records: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (text, current | tombstoned)


@dataclass(frozen=True)
class Shared:
    paths: HostPaths
    engine: Engine  # the agents'
    owner: Engine  # the host's (the same engine on SQLite)
    store: str


_shared: list[Shared] = []


@pytest.fixture(params=STORES)
def shared(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Shared]:
    with home_on(str(request.param), tmp_path / "home", request) as paths, ExitStack() as stack:
        owner = stack.enter_context(open_engine(paths))
        agents = stack.enter_context(open_engine(paths, runtime=True)) if request.param == "postgres" else owner
        _shared.append(Shared(paths, agents, owner, "PostgreSQL" if request.param == "postgres" else "SQLite"))
        yield _shared[-1]
        _shared.clear()


def _code(envelope: dict[str, Any]) -> str:
    return "ok" if envelope["ok"] else str(envelope["error"]["code"])


class IsolationMachine(RuleBasedStateMachine):
    candidates = Bundle("candidates")
    records = Bundle("records")

    @initialize()
    def fresh_tenants(self) -> None:
        self.shared = _shared[-1]
        sequence = next(_sequences)
        scopes = [(f"t{sequence}-a", "w1"), (f"t{sequence}-a", "w2"), (f"t{sequence}-b", "w1")]
        self.bindings: list[tuple[Binding, tuple[str, str]]] = []
        for index, (tenant, workspace) in enumerate([*scopes, scopes[0]]):
            principal = "bob" if index == 3 else "alice"  # a second principal in the first scope
            issued = bind(self.shared.paths, tenant=tenant, workspace=workspace, principal=principal)
            self.bindings.append((issued.binding, (tenant, workspace)))
        self.model: dict[tuple[str, str], Scope] = {scope: Scope() for scope in scopes}
        self.owner: dict[str, tuple[str, str]] = {}

    def _call(self, who: int, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        next(_steps)
        return self.shared.engine.handle(self.bindings[who][0], tool, arguments)

    def _scope(self, who: int) -> tuple[str, str]:
        return self.bindings[who][1]

    def _approve(self, target: str) -> None:
        engine = self.shared.owner
        for row, status in engine.confirmations():
            if row.target == target and status == "requested":
                engine.approve_confirmation(row.confirmation_id, decided_by="host:model", ttl_ms=300_000)

    @rule(target=candidates, who=st.integers(0, 3), words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    def capture(self, who: int, words: list[str]) -> str:
        text = f"{' '.join(words)} note {next(_steps)}"
        envelope = self._call(who, "engram_memory_capture", capture_args(text))
        assert envelope["ok"], envelope
        candidate_id = str(envelope["output"]["value"]["candidate_id"])
        self.model[self._scope(who)].candidates[candidate_id] = "pending"
        self.owner[candidate_id] = self._scope(who)
        self.text_of = getattr(self, "text_of", {})
        self.text_of[candidate_id] = text
        return candidate_id

    @rule(target=records, candidate=consumes(candidates), who=st.integers(0, 3))
    def admit(self, candidate: str, who: int) -> str:
        args = {"candidate_id": candidate, "idempotency_key": unique_key("m-admit")}
        envelope = self._call(who, "engram_memory_request_admission", args)
        scope = self.model[self._scope(who)]
        if self.owner[candidate] != self._scope(who):
            assert _code(envelope) == "NOT_FOUND", envelope
            next(_foreign)
            return "mem_" + "a" * 26  # an id of nobody's: later rules treat it as foreign
        if scope.candidates[candidate] != "pending":
            assert _code(envelope) in ("ALREADY_TERMINAL", "ILLEGAL_TRANSITION"), envelope
            return "mem_" + "a" * 26
        assert envelope["ok"], envelope
        outcome = envelope["output"]["value"]["outcome"]
        assert outcome["status"] == "accepted", outcome
        scope.candidates[candidate] = "accepted"
        record_id = str(outcome["record_id"])
        scope.records[record_id] = (self.text_of[candidate], "current")
        self.owner[record_id] = self._scope(who)
        return record_id

    @rule(record=records, who=st.integers(0, 3))
    def get(self, record: str, who: int) -> None:
        envelope = self._call(who, "engram_memory_get", {"record_id": record, "purpose_ref": PURPOSE})
        known = self.model[self._scope(who)].records.get(record)
        if known is None or known[1] != "current":
            never = self._call(who, "engram_memory_get", {"record_id": "mem_" + "b" * 26, "purpose_ref": PURPOSE})
            assert _code(envelope) == "NOT_FOUND" and envelope["error"] == never["error"], envelope
            next(_foreign)
            return
        assert envelope["ok"], envelope
        assert envelope["output"]["value"]["record"]["components"][0]["text"] == known[0]

    @rule(who=st.integers(0, 3), word=st.sampled_from(WORDS))
    def search(self, who: int, word: str) -> None:
        envelope = self._call(who, "engram_memory_search", {"query": word, "purpose_ref": PURPOSE, "limit": 50})
        assert envelope["ok"], envelope
        found = {packet["record"]["record_id"] for packet in envelope["output"]["value"]["records"]}
        mine = self.model[self._scope(who)].records
        current = {rid for rid, (text, state) in mine.items() if state == "current"}
        assert found <= current, found - current  # never another scope's, never a forgotten one
        assert {rid for rid in current if word in mine[rid][0].split()} <= found

    @rule(candidate=candidates, who=st.integers(0, 3))
    def withdraw(self, candidate: str, who: int) -> None:
        args = {"candidate_id": candidate, "idempotency_key": unique_key("m-w"), "reason_ref": "r"}
        envelope = self._call(who, "engram_memory_withdraw", args)
        if self.owner[candidate] != self._scope(who):
            assert _code(envelope) == "NOT_FOUND", envelope
            return
        state = self.model[self._scope(who)].candidates[candidate]
        if state != "pending":
            assert _code(envelope) in ("ALREADY_TERMINAL", "ILLEGAL_TRANSITION"), envelope
            return
        assert _code(envelope) == "gate_failed", envelope
        self._approve(candidate)
        assert self._call(who, "engram_memory_withdraw", args)["ok"]
        self.model[self._scope(who)].candidates[candidate] = "withdrawn"

    @rule(record=records, who=st.integers(0, 3))
    def forget(self, record: str, who: int) -> None:
        args = {"record_id": record, "idempotency_key": unique_key("m-f"), "reason_ref": "r"}
        envelope = self._call(who, "engram_memory_forget", args)
        known = self.model[self._scope(who)].records.get(record)
        if known is None:
            assert _code(envelope) == "NOT_FOUND", envelope
            return
        if known[1] != "current":
            assert _code(envelope) == "ALREADY_TERMINAL", envelope
            return
        assert _code(envelope) == "gate_failed", envelope
        self._approve(record)
        assert self._call(who, "engram_memory_forget", args)["ok"]
        self.model[self._scope(who)].records[record] = (known[0], "tombstoned")

    @invariant()
    def no_foreign_confirmation_is_left_waiting(self) -> None:
        for row, status in self.shared.owner.confirmations():
            assert status != "requested" or row.target not in self.owner, row


def test_random_sequences_of_all_six_tools_match_the_isolation_model(shared: Shared) -> None:
    examples = amount(60, 10_000) if shared.store == "SQLite" else amount(30, 2_000)
    first_sequence, first_step, first_foreign = next(_sequences), next(_steps), next(_foreign)
    IsolationMachine.TestCase.settings = settings(
        max_examples=examples,
        stateful_step_count=12,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    IsolationMachine.TestCase("runTest").runTest()
    where = shared.store
    target = ">= 10,000" if where == "SQLite" else "besides SQLite's"
    report(f"model-based isolation sequences run ({where})", next(_sequences) - first_sequence - 1, target=target)
    report(f"tool calls compared with the model ({where})", next(_steps) - first_step - 1, unit="calls")
    probes = next(_foreign) - first_foreign - 1
    report(f"cross-scope probes answered as if the id never existed ({where})", probes, target="every one")
