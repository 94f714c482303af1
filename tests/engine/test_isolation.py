"""Isolation attacks in-process: another scope's ids answer exactly like unknown ids, and scores never leak."""

from __future__ import annotations

from typing import Any

import pytest

from engram_memory.engine.engine import Engine
from engram_memory.host.settings import HostPaths
from tests.support.homes import bind
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key

UNKNOWN_RECORD = "mem_aaaaaaaaaaaaaaaaaaaaaaaaaa"
UNKNOWN_CANDIDATE = "cand_aaaaaaaaaaaaaaaaaaaaaaaaaa"


def _shape(envelope: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in envelope.items() if key != "auditId"}


@pytest.fixture(
    params=[("tenant-b", "workspace-1"), ("tenant-a", "workspace-2")], ids=["other-tenant", "other-workspace"]
)
def intruder(
    served: Engine,
    request: pytest.FixtureRequest,
    paths: HostPaths,
) -> InProcessAgent:
    tenant, workspace = request.param
    return InProcessAgent(served, bind(paths, tenant=tenant, workspace=workspace, principal="alice").binding)


def test_isolation_get_of_foreign_record_answers_like_unknown(agent: InProcessAgent, intruder: InProcessAgent) -> None:
    record_id = agent.remember("Tenant A's roadmap is confidential.")
    assert _shape(intruder.get(record_id)) == _shape(intruder.get(UNKNOWN_RECORD))
    assert intruder.get(record_id)["error"]["code"] == "NOT_FOUND"


def test_isolation_search_never_returns_foreign_records(agent: InProcessAgent, intruder: InProcessAgent) -> None:
    agent.remember("Tenant A's roadmap is confidential.")
    assert intruder.search("tenant roadmap confidential")["records"] == []


def test_isolation_admission_of_foreign_candidate_answers_like_unknown(
    agent: InProcessAgent, intruder: InProcessAgent
) -> None:
    candidate = agent.capture("Tenant A's pending draft.")["candidate_id"]
    foreign = intruder.call(
        "engram_memory_request_admission", {"candidate_id": candidate, "idempotency_key": unique_key("x")}
    )
    unknown = intruder.call(
        "engram_memory_request_admission", {"candidate_id": UNKNOWN_CANDIDATE, "idempotency_key": unique_key("x")}
    )
    assert _shape(foreign) == _shape(unknown) and foreign["error"]["code"] == "NOT_FOUND"
    assert agent.admit(candidate)["status"] == "accepted"


def test_isolation_withdraw_and_forget_of_foreign_targets_answer_like_unknown(
    agent: InProcessAgent, intruder: InProcessAgent, steered: Engine
) -> None:
    candidate = agent.capture("Tenant A's second draft.")["candidate_id"]
    record_id = agent.remember("Tenant A's kept fact.")
    for tool, field, known, unknown in [
        ("engram_memory_withdraw", "candidate_id", candidate, UNKNOWN_CANDIDATE),
        ("engram_memory_forget", "record_id", record_id, UNKNOWN_RECORD),
    ]:
        foreign = intruder.call(tool, {field: known, "idempotency_key": unique_key("x"), "reason_ref": "r"})
        missing = intruder.call(tool, {field: unknown, "idempotency_key": unique_key("x"), "reason_ref": "r"})
        assert _shape(foreign) == _shape(missing) and foreign["error"]["code"] == "NOT_FOUND"
    assert steered.confirmations(include_decided=True) == []


def test_isolation_idempotency_keys_are_per_scope(agent: InProcessAgent, intruder: InProcessAgent) -> None:
    key = unique_key("shared")
    from tests.support.payloads import capture_args

    agent.value("engram_memory_capture", capture_args("Tenant A's text.", key=key))
    other = intruder.value("engram_memory_capture", capture_args("Intruder's text.", key=key))
    assert other["status"] == "committed_pending"


def test_isolation_scores_do_not_depend_on_other_tenants(agent: InProcessAgent, intruder: InProcessAgent) -> None:
    agent.remember("The kestrel service owns invoicing.")
    before = agent.search("kestrel invoicing")["records"][0]["score"]
    for index in range(10):
        intruder.remember(f"Kestrel note {index}: kestrel kestrel invoicing elsewhere.")
    after = agent.search("kestrel invoicing")["records"][0]["score"]
    assert before == after
