"""The order of checks as docs/tools.md states it (contract/checks.py): a call that fails two neighbouring
checks at once is answered by the earlier one.

Each case below builds such a call for real, on either store. Two neighbours cannot fail together
(a target unknown to the caller has no state; capture, the one call the host's retention rules
apply to, has no target), so those pairs are shown with the check one step further on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engram_memory.contract.checks import ORDER_OF_CHECKS, Check
from engram_memory.contract.errors import ProtocolFault
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import RevocationRow
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE, capture_args, unique_key

FORGET = "engram_memory_forget"
CAPTURE = "engram_memory_capture"
SEARCH = "engram_memory_search"
ADMIT = "engram_memory_request_admission"
YEAR_MS = 365 * 86_400_000


class World:
    def __init__(self, served: Engine, steered: Engine, paths: HostPaths, clock: ManualClock) -> None:
        self.served, self.steered, self.paths, self.clock = served, steered, paths, clock
        self.agent = InProcessAgent(served, bind(paths).binding)

    def agent_with(self, **claims: Any) -> InProcessAgent:
        return InProcessAgent(self.served, bind(self.paths, **claims).binding)

    def revoked(self, agent: InProcessAgent) -> InProcessAgent:
        row = RevocationRow(token_id=agent.binding.token_id, revoked_at_ms=self.clock.now, revoked_by="host:test")
        self.steered.deps.vault.revoke(row)
        return agent

    def answer(self, agent: InProcessAgent | None, tool: str, arguments: Any) -> str:
        """The code that answers the call: a protocol fault's number, else the envelope's error code."""
        try:
            envelope = self.served.handle(None if agent is None else agent.binding, tool, arguments)
        except ProtocolFault as fault:
            return str(fault.code)
        return "ok" if envelope["ok"] else str(envelope["error"]["code"])


def _trusted_context_before_grant(world: World) -> str:
    return world.answer(None, "engram_memory_nosuch", {})


def _grant_before_expiry(world: World) -> str:
    expired = world.agent_with(grants=frozenset({SEARCH}), now_s=world.clock.now // 1000 - 7200, lifetime_s=60)
    return world.answer(expired, CAPTURE, capture_args("x"))


def _expiry_before_revocation(world: World) -> str:
    expired = world.agent_with(now_s=world.clock.now // 1000 - 7200, lifetime_s=60)
    return world.answer(world.revoked(expired), SEARCH, {"query": "x", "purpose_ref": PURPOSE})


def _revocation_before_schema(world: World) -> str:
    return world.answer(world.revoked(world.agent_with()), SEARCH, {"query": ""})


def _schema_before_purpose(world: World) -> str:
    return world.answer(world.agent, SEARCH, {"query": "", "purpose_ref": "purpose:other"})


def _purpose_before_plausible_times(world: World) -> str:
    return world.answer(world.agent, CAPTURE, capture_args("x", purpose="purpose:other", valid_from_ms=1_700_000_000))


def _plausible_times_before_idempotency(world: World) -> str:
    key = unique_key()
    assert world.answer(world.agent, CAPTURE, capture_args("first", key=key)) == "ok"
    return world.answer(world.agent, CAPTURE, capture_args("second", key=key, valid_from_ms=1_700_000_000))


def _idempotency_before_target(world: World) -> str:
    key = unique_key()
    candidate_id = world.agent.capture("Admit me.")["candidate_id"]
    first = {"candidate_id": candidate_id, "idempotency_key": key}
    assert world.answer(world.agent, ADMIT, first) == "ok"
    return world.answer(world.agent, ADMIT, {**first, "candidate_id": "cand_" + "0" * 26})


def _target_before_lifecycle(world: World) -> str:
    """A record another workspace forgot: out of the caller's scope, and terminal."""
    elsewhere = world.agent_with(workspace="workspace-2")
    record_id = elsewhere.remember("Forgotten elsewhere.")
    world.steered.transition("tombstone", record_id, decided_by="host:test")
    forget = {"record_id": record_id, "idempotency_key": unique_key(), "reason_ref": "reason:x"}
    return world.answer(world.agent, FORGET, forget)


def _lifecycle_before_gate(world: World) -> str:
    record_id = world.agent.remember("Already forgotten.")
    world.steered.transition("tombstone", record_id, decided_by="host:test")
    forget = {"record_id": record_id, "idempotency_key": unique_key(), "reason_ref": "reason:x"}
    return world.answer(world.agent, FORGET, forget)


def _host_policy_before_gate(world: World) -> str:
    gated = world.agent_with(confirm_mutations=True)
    too_long = {"derivative_rule": "make-ineligible", "expires_at": _instant(world.clock.now + 2 * YEAR_MS)}
    return world.answer(gated, CAPTURE, capture_args("Kept too long.", retention=too_long))


def _gate_before_operation(world: World) -> str:
    record_id = world.agent.remember("Forget me only with a person's approval.")
    forget = {"record_id": record_id, "idempotency_key": unique_key(), "reason_ref": "reason:x"}
    answer = world.answer(world.agent, FORGET, forget)
    assert world.steered.record_details(record_id).record.state == "accepted_current"
    return answer


def _instant(ms: int) -> str:
    from engram_memory.contract.instants import format_instant

    return format_instant(ms)


# (earlier, later): the call failing both, and what the earlier check answers.
CASES: dict[tuple[Check, Check], tuple[Callable[[World], str], str]] = {
    (Check.TRUSTED_CONTEXT, Check.GRANT): (_trusted_context_before_grant, "-32603"),
    (Check.GRANT, Check.EXPIRY): (_grant_before_expiry, "-32602"),
    (Check.EXPIRY, Check.REVOCATION): (_expiry_before_revocation, "AUTHORIZATION_EXPIRED"),
    (Check.REVOCATION, Check.SCHEMA): (_revocation_before_schema, "AUTHORIZATION_REVOKED"),
    (Check.SCHEMA, Check.PURPOSE): (_schema_before_purpose, "INVALID_SCHEMA"),
    (Check.PURPOSE, Check.PLAUSIBLE_TIMES): (_purpose_before_plausible_times, "-32603"),
    (Check.PLAUSIBLE_TIMES, Check.IDEMPOTENCY): (_plausible_times_before_idempotency, "INVALID_SCHEMA"),
    (Check.IDEMPOTENCY, Check.TARGET): (_idempotency_before_target, "DIGEST_CONFLICT"),
    (Check.TARGET, Check.LIFECYCLE): (_target_before_lifecycle, "NOT_FOUND"),
    (Check.LIFECYCLE, Check.GATE): (_lifecycle_before_gate, "ALREADY_TERMINAL"),
    (Check.HOST_POLICY, Check.GATE): (_host_policy_before_gate, "UNAUTHORIZED"),
    (Check.GATE, Check.OPERATION): (_gate_before_operation, "gate_failed"),
}


def test_every_check_is_shown_before_the_one_after_it() -> None:
    order = list(ORDER_OF_CHECKS)
    for earlier, later in CASES:
        assert order.index(earlier) < order.index(later), (earlier, later)
    shown = {check for pair in CASES for check in pair}
    assert shown == set(Check)


@pytest.mark.parametrize(("earlier", "later"), list(CASES), ids=[f"{a.name}-{b.name}" for a, b in CASES])
def test_a_call_failing_two_checks_is_answered_by_the_earlier(
    earlier: Check, later: Check, served: Engine, steered: Engine, paths: HostPaths, clock: ManualClock
) -> None:
    make, expected = CASES[(earlier, later)]
    assert make(World(served, steered, paths, clock)) == expected
