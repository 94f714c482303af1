"""Revoked bindings: every later call answers AUTHORIZATION_REVOKED, checked right after expiry."""

from __future__ import annotations

import pytest

from engram_memory.contract.errors import ProtocolFault
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import RevocationRow
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE, capture_args
from tests.support.raw import raw_store


def _revoke(engine: Engine, token_id: str) -> RevocationRow:
    return engine.deps.vault.revoke(
        RevocationRow(token_id=token_id, revoked_at_ms=engine.deps.clock.now_ms(), revoked_by="h")
    )


def test_revoked_binding_answers_authorization_revoked_on_every_tool(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    record_id = agent.remember("Deploys need two approvals.")
    _revoke(steered, agent.binding.token_id)
    calls = {
        "engram_memory_search": {"query": "deploys", "purpose_ref": PURPOSE},
        "engram_memory_get": {"record_id": record_id, "purpose_ref": PURPOSE},
        "engram_memory_capture": capture_args("Another decision."),
        "engram_memory_forget": {"record_id": record_id, "idempotency_key": "k" * 16, "reason_ref": "r"},
        # Checked before the schema: even arguments that would not validate are answered as revoked.
        "engram_memory_request_admission": {"unknown": True},
    }
    for tool, arguments in calls.items():
        envelope = agent.call(tool, arguments)
        assert envelope["error"] == {
            "code": "AUTHORIZATION_REVOKED",
            "message": "The host binding for this session was revoked.",
            "retriable": False,
        }, tool


def test_revocation_leaves_other_bindings_of_the_same_principal_working(
    served: Engine, agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    other = InProcessAgent(served, bind(paths, session="session-2").binding)
    _revoke(steered, agent.binding.token_id)
    assert agent.error_code("engram_memory_search", {"query": "x", "purpose_ref": PURPOSE}) == "AUTHORIZATION_REVOKED"
    assert other.search("deploys")["records"] == []


def test_revoking_twice_keeps_the_first_revocation(steered: Engine, paths: HostPaths, clock: ManualClock) -> None:
    token_id = bind(paths).binding.token_id
    first = _revoke(steered, token_id)
    clock.advance(5_000)
    assert _revoke(steered, token_id) == first


def test_expiry_is_answered_before_revocation(
    served: Engine, steered: Engine, paths: HostPaths, clock: ManualClock
) -> None:
    expired = InProcessAgent(served, bind(paths, now_s=clock.now // 1000 - 7200, lifetime_s=60).binding)
    _revoke(steered, expired.binding.token_id)
    assert expired.error_code("engram_memory_search", {"query": "x", "purpose_ref": PURPOSE}) == "AUTHORIZATION_EXPIRED"


def test_a_tool_the_binding_does_not_grant_stays_a_protocol_error_after_revocation(
    steered: Engine, paths: HostPaths
) -> None:
    search_only = bind(paths, grants=frozenset({"engram_memory_search"})).binding
    _revoke(steered, search_only.token_id)
    with pytest.raises(ProtocolFault) as raised:
        steered.handle(search_only, "engram_memory_capture", capture_args("x"))
    assert raised.value.code == -32602


def test_a_revoked_call_is_audited_with_its_token_and_outcome(
    agent: InProcessAgent, steered: Engine, paths: HostPaths
) -> None:
    _revoke(steered, agent.binding.token_id)
    audit_id = agent.call("engram_memory_search", {"query": "x", "purpose_ref": PURPOSE})["auditId"]
    with raw_store(paths) as db:
        row = db.one("SELECT token_id, outcome FROM audit_log WHERE audit_id = ?", (audit_id,))
    assert row == (agent.binding.token_id, "AUTHORIZATION_REVOKED")
