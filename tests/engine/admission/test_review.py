"""The host's review queue and the policy's auto-accept rules, in-process over a real home's store.

A human decision must leave the store as if the policy had made it: one journaled event in the
candidate's scope, tables the journal folds back into, and the agent's own key replaying the outcome.
"""

from __future__ import annotations

import dataclasses
import time
import tomllib
from typing import Any

import pytest

from engram_memory.contract.binding import Binding
from engram_memory.contract.errors import ContractError, ErrorCode
from engram_memory.contract.tools import Tool
from engram_memory.engine import journal
from engram_memory.engine.admission import review
from engram_memory.engine.admission.decision import CandidateFacts, Verdict, decide
from engram_memory.engine.admission.policy import AdmissionPolicy, AutoAccept, PolicyError, policy_from_mapping
from engram_memory.engine.admission.review import ReviewError
from engram_memory.engine.engine import Engine
from engram_memory.engine.mutation import host_actor
from engram_memory.engine.ports.store import JournalEvent, Scope
from engram_memory.engine.receipts import transaction_receipt_digest
from engram_memory.host.bindings import issue_binding
from engram_memory.host.keys.files import load_signing_key
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.homes import ALL_GRANTS, journal_of
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import PURPOSE, unique_key
from tests.support.raw import rows

SCOPE = Scope(tenant="tenant-a", workspace="workspace-1")
ADMIT = Tool.REQUEST_ADMISSION.value
HOST = "host:reviewer"
EMAIL = "dana.quill@acme.io"


def _policy(paths: HostPaths, mode: str = "review", **auto_accept: list[str]) -> None:
    """The default policy text with `mode` and the [auto_accept] lists set (content changes are re-read)."""
    text = DEFAULT_POLICY_TOML.replace('mode = "auto"', f'mode = "{mode}"')
    for name, values in auto_accept.items():
        literal = "[" + ", ".join(f'"{value}"' for value in values) + "]"
        text = text.replace(f"{name} = []", f"{name} = {literal}")
    paths.policy.write_text(text, encoding="utf-8")


def _agent(served: Engine, paths: HostPaths, trust_class: str = "asserted", **claims: str) -> InProcessAgent:
    """An agent whose binding the host signed, trust class included (as `bind --trust-class` does)."""
    fields = {"tenant": "tenant-a", "workspace": "workspace-1", "principal": "alice", "agent_id": "agent-1"}
    fields.update(claims)
    issued = issue_binding(
        load_signing_key(paths),
        session="session-1",
        purpose_ref=PURPOSE,
        grants=ALL_GRANTS,
        confirm_mutations=False,
        lifetime_s=3600,
        now_s=int(time.time()),
        trust_class=trust_class,
        **fields,
    )
    binding: Binding = issued.binding
    return InProcessAgent(served, binding)


def _admission(agent: InProcessAgent, candidate_id: str, key: str) -> dict[str, Any]:
    return agent.value(ADMIT, {"candidate_id": candidate_id, "idempotency_key": key})


def _pending(agent: InProcessAgent, text: str, **options: Any) -> tuple[str, str]:
    """A candidate the policy left for a human; returns (candidate_id, the agent's admission key)."""
    candidate_id = agent.capture(text, **options)["candidate_id"]
    key = unique_key("admit")
    outcome = _admission(agent, candidate_id, key)["outcome"]
    assert outcome["status"] == "pending_adjudication", outcome
    return candidate_id, key


def _events(paths: HostPaths, scope: Scope = SCOPE) -> list[JournalEvent]:
    return journal_of(paths, scope)[0]


def _reasons_of(paths: HostPaths, candidate_id: str) -> list[str]:
    decided = [
        e for e in _events(paths) if e.body["data"].get("candidate_id") == candidate_id and "reasons" in e.body["data"]
    ]
    return list(decided[-1].body["data"]["reasons"])


# -- the queue ------------------------------------------------------------------------------------


def test_queue_lists_waiting_candidates_oldest_first_across_scopes(
    served: Engine, paths: HostPaths, steered: Engine, clock: ManualClock
) -> None:
    _policy(paths)
    alice = _agent(served, paths)
    bob = _agent(served, paths, tenant="tenant-b", principal="bob", agent_id="agent-9")
    first, _ = _pending(alice, "Release notes are drafted before the freeze.")
    clock.advance(1000)
    second, _ = _pending(bob, "Canary deploys run for one hour before promotion.")
    clock.advance(1000)
    unsent = alice.capture("Nobody asked admission for this one yet.")["candidate_id"]

    queue = review.review_queue(steered.deps)
    assert [row.candidate_id for row in queue] == [first, second]
    assert queue[1].scope == Scope("tenant-b", "workspace-1")
    assert (queue[1].actor.principal, queue[1].actor.agent_id, queue[1].trust_class) == ("bob", "agent-9", "asserted")
    assert queue[0].review_reasons == ("review_mode",) and queue[0].adjudication
    everything = review.review_queue(steered.deps, include_unsent=True)
    assert [row.candidate_id for row in everything] == [first, second, unsent]
    assert [row.candidate_id for row in review.review_queue(steered.deps, limit=1)] == [first]


def test_queue_drops_candidates_once_decided(served: Engine, paths: HostPaths, steered: Engine) -> None:
    _policy(paths)
    agent = _agent(served, paths)
    accepted, _ = _pending(agent, "Backups are restored monthly to prove they work.")
    rejected, _ = _pending(agent, "Staging is rebuilt from scratch every Sunday.")
    review.accept_candidate(steered.deps, accepted, decided_by=HOST)
    review.reject_candidate(steered.deps, rejected, decided_by=HOST)
    assert review.review_queue(steered.deps, include_unsent=True) == []


# -- show -----------------------------------------------------------------------------------------


def test_show_decrypts_the_candidate_and_marks_findings_of_every_category(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    _policy(paths)  # personal_data stays off in the policy, so the candidate reaches review
    agent = _agent(served, paths)
    text = f"Escalations about invoices go to {EMAIL} first."
    candidate_id, _ = _pending(agent, text, context="Finance asked for one contact.")

    view = review.show_candidate(steered.deps, candidate_id)
    assert view.payload["components"][0]["text"] == text
    assert view.payload["components"][1]["text"] == "Finance asked for one contact."
    assert view.payload["scope_ref"] == SCOPE.ref
    assert view.evidence["evidence_ref"] == "evidence:review"
    assert view.candidate.secret_categories == ()
    [finding] = view.findings
    assert (finding.category, finding.path) == ("personal_data", "payload/components/0/text")
    assert text[finding.start : finding.end] == EMAIL


def test_show_of_a_candidate_whose_data_key_is_gone_is_blob_missing(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    _policy(paths)
    candidate_id, _ = _pending(_agent(served, paths), "Incident reviews are blameless.")
    steered.deps.vault.destroy([candidate_id], 0)
    with pytest.raises(ContractError) as raised:
        review.show_candidate(steered.deps, candidate_id)
    assert raised.value.code is ErrorCode.BLOB_MISSING


def test_show_refuses_unknown_and_decided_candidates(served: Engine, paths: HostPaths, steered: Engine) -> None:
    _policy(paths)
    candidate_id, _ = _pending(_agent(served, paths), "Load tests run against a production-sized copy.")
    with pytest.raises(ReviewError, match=r"^no such candidate: cand_unknown$"):
        review.show_candidate(steered.deps, "cand_unknown")
    review.reject_candidate(steered.deps, candidate_id, decided_by=HOST)
    with pytest.raises(review.CandidateDecided, match=r"is rejected \(review:person\): its body is gone"):
        review.show_candidate(steered.deps, candidate_id)


# -- accept ---------------------------------------------------------------------------------------


def test_accept_makes_a_searchable_record_and_the_agents_key_replays_it(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    _policy(paths)
    agent = _agent(served, paths)
    candidate_id, key = _pending(agent, "Quarterly key rotation happens on the first Monday.")
    decision = review.accept_candidate(steered.deps, candidate_id, decided_by=HOST)

    assert decision.status == "accepted" and decision.reasons == ("host_review",)
    assert decision.answers_rewritten == 1 and decision.key_destroyed
    record_id = decision.record_id
    assert record_id is not None and agent.found_ids("quarterly key rotation monday") == [record_id]
    assert agent.get(record_id)["output"]["value"]["record"]["provenance"]["principal"] == "alice"

    replay = _admission(agent, candidate_id, key)
    assert replay["replayed"] is True
    outcome = replay["outcome"]
    assert (outcome["status"], outcome["record_id"], outcome["cursor"]) == ("accepted", record_id, decision.cursor)
    assert outcome["decision_receipt_digest"] == decision.decision_receipt_digest
    event = _events(paths)[-1]
    assert (event.kind, event.cursor, event.body["actor"]) == (
        journal.CANDIDATE_ACCEPTED,
        decision.cursor,
        host_actor(HOST),
    )
    assert outcome["transaction_receipt_digest"] == transaction_receipt_digest(ADMIT, key, [event])
    # Exactly one readable body remains: the record's; the candidate's body and key are gone.
    assert rows(paths, "SELECT owner_id FROM sealed_bodies") == [(record_id,)]
    assert steered.deps.vault.shredded([candidate_id]) == {candidate_id}


def test_accept_rewrites_every_waiting_answer_and_new_keys_see_the_lifecycle(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    _policy(paths)
    agent = _agent(served, paths)
    candidate_id, first_key = _pending(agent, "On-call hand-offs happen at 09:00 local time.")
    second_key = unique_key("admit")
    assert _admission(agent, candidate_id, second_key)["outcome"]["status"] == "pending_adjudication"
    decision = review.accept_candidate(steered.deps, candidate_id, decided_by=HOST)
    assert decision.answers_rewritten == 2
    first, second = (_admission(agent, candidate_id, key)["outcome"] for key in (first_key, second_key))
    assert first["record_id"] == second["record_id"] == decision.record_id
    assert first["transaction_receipt_digest"] != second["transaction_receipt_digest"]
    fresh = {"candidate_id": candidate_id, "idempotency_key": unique_key("late")}
    assert agent.error_code(ADMIT, fresh) == "ILLEGAL_TRANSITION"


def test_accept_of_identical_current_content_points_at_that_record(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    _policy(paths)
    agent = _agent(served, paths)
    text = "Every public endpoint has a rate limit."
    first, _ = _pending(agent, text)
    second, second_key = _pending(agent, text)
    record_id = review.accept_candidate(steered.deps, first, decided_by=HOST).record_id
    duplicate = review.accept_candidate(steered.deps, second, decided_by=HOST)

    assert (duplicate.status, duplicate.record_id) == ("duplicate_exact", record_id)
    assert duplicate.reasons == ("host_review", "duplicate_exact")
    assert _events(paths)[-1].kind == journal.CANDIDATE_DUPLICATE
    assert rows(paths, "SELECT count(*) FROM records") == [(1,)]
    assert rows(paths, "SELECT count(*) FROM sealed_bodies WHERE owner_id = ?", second) == [(0,)]
    outcome = _admission(agent, second, second_key)["outcome"]
    assert (outcome["status"], outcome["record_id"]) == ("duplicate_exact", record_id)


def test_tombstone_guarded_candidate_is_accepted_by_a_human(served: Engine, paths: HostPaths, steered: Engine) -> None:
    agent = _agent(served, paths)
    text = "The legacy billing export is read-only."
    forgotten = agent.remember(text)
    forget = {"record_id": forgotten, "idempotency_key": unique_key("forget"), "reason_ref": "reason:t"}
    assert agent.error_code("engram_memory_forget", forget) == "gate_failed"
    steered.approve_confirmation(steered.confirmations()[0][0].confirmation_id, decided_by=HOST, ttl_ms=60_000)
    agent.value("engram_memory_forget", forget)

    candidate_id, key = _pending(agent, text)  # mode "auto": only the tombstone guard holds it back
    assert review.review_queue(steered.deps)[0].review_reasons == ("tombstone_guard",)
    decision = review.accept_candidate(steered.deps, candidate_id, decided_by=HOST)
    assert decision.status == "accepted" and decision.record_id not in (None, forgotten)
    assert agent.found_ids("legacy billing export read-only") == [decision.record_id]
    assert _admission(agent, candidate_id, key)["outcome"]["record_id"] == decision.record_id


def test_accept_is_refused_when_the_policy_rejection_rules_forbid_it(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    agent = _agent(served, paths)
    leaked = agent.capture("The CI token is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")["candidate_id"]
    assert [row.candidate_id for row in review.review_queue(steered.deps, include_unsent=True)] == [leaked]
    with pytest.raises(
        ReviewError,
        match=r"^the policy rejects candidate cand_\w+ \(secret:api_token, secret:high_entropy\): reject it instead$",
    ):
        review.accept_candidate(steered.deps, leaked, decided_by=HOST)
    assert rows(paths, "SELECT state FROM candidates") == [("pending",)]
    assert review.reject_candidate(steered.deps, leaked, decided_by=HOST).status == "rejected"


def test_accept_of_a_candidate_never_sent_to_review(served: Engine, paths: HostPaths, steered: Engine) -> None:
    agent = _agent(served, paths)
    candidate_id = agent.capture("Feature branches live at most two weeks.")["candidate_id"]
    decision = review.accept_candidate(steered.deps, candidate_id, decided_by=HOST)
    assert decision.status == "accepted" and decision.answers_rewritten == 0
    assert agent.found_ids("feature branches weeks") == [decision.record_id]


# -- reject ---------------------------------------------------------------------------------------


def test_reject_destroys_the_body_and_the_data_key_and_replays_rejected(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    _policy(paths)
    agent = _agent(served, paths)
    candidate_id, key = _pending(agent, "Ops reviews every cron job twice a year.")
    assert steered.deps.vault.get(SCOPE, candidate_id) is not None
    decision = review.reject_candidate(steered.deps, candidate_id, decided_by=HOST)

    assert (decision.status, decision.record_id, decision.reasons) == ("rejected", None, ("host_review",))
    assert rows(paths, "SELECT count(*) FROM sealed_bodies") == [(0,)]
    assert steered.deps.vault.get(SCOPE, candidate_id) is None
    assert steered.deps.vault.shredded([candidate_id]) == {candidate_id}
    replay = _admission(agent, candidate_id, key)
    assert replay["replayed"] is True
    assert replay["outcome"]["status"] == "rejected" and "record_id" not in replay["outcome"]
    assert agent.found_ids("cron job") == []


# -- refusals -------------------------------------------------------------------------------------


def test_deciding_a_candidate_that_is_not_pending_is_refused_with_its_code(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    _policy(paths)
    agent = _agent(served, paths)
    rejected, _ = _pending(agent, "Dashboards are owned by the team that pages.")
    accepted, _ = _pending(agent, "Runbooks link from every alert.")
    review.reject_candidate(steered.deps, rejected, decided_by=HOST)
    review.accept_candidate(steered.deps, accepted, decided_by=HOST)
    head = _events(paths)[-1].cursor

    with pytest.raises(ReviewError, match=f"^ALREADY_TERMINAL: candidate {rejected} is rejected, not pending$"):
        review.accept_candidate(steered.deps, rejected, decided_by=HOST)
    with pytest.raises(ReviewError, match=f"^ILLEGAL_TRANSITION: candidate {accepted} is accepted_current"):
        review.reject_candidate(steered.deps, accepted, decided_by=HOST)
    with pytest.raises(ReviewError, match=r"^no such candidate: cand_missing$"):
        review.accept_candidate(steered.deps, "cand_missing", decided_by=HOST)
    assert _events(paths)[-1].cursor == head


def test_deciding_while_the_policy_file_is_broken_is_policy_unavailable(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    _policy(paths)
    candidate_id, _ = _pending(_agent(served, paths), "Postmortems are published within a week.")
    paths.policy.write_text('mode = "sometimes"\n', encoding="utf-8")
    with pytest.raises(ContractError) as raised:
        review.accept_candidate(steered.deps, candidate_id, decided_by=HOST)
    assert raised.value.code is ErrorCode.POLICY_UNAVAILABLE
    assert rows(paths, "SELECT state, adjudication FROM candidates") == [("pending", 1)]


class _PolicyChangesMidDecision:
    """Simulated fault: the host edits the policy between the decision and its commit (no hook exists
    to interleave a real file edit there)."""

    def __init__(self) -> None:
        self.reads = 0

    def current(self) -> AdmissionPolicy:
        self.reads += 1
        return AdmissionPolicy(mode="review", version=self.reads).with_digest()


def test_decision_is_policy_stale_when_the_policy_changed_before_commit_simulated(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    _policy(paths)
    candidate_id, _ = _pending(_agent(served, paths), "Secrets live in the vault service only.")
    head = _events(paths)[-1].cursor
    changing = dataclasses.replace(steered.deps, policies=_PolicyChangesMidDecision())
    with pytest.raises(ContractError) as raised:
        review.accept_candidate(changing, candidate_id, decided_by=HOST)
    assert raised.value.code is ErrorCode.POLICY_STALE
    assert _events(paths)[-1].cursor == head
    assert rows(paths, "SELECT count(*) FROM records") == [(0,)]


# -- the journal ----------------------------------------------------------------------------------


def test_journal_fold_equals_tables_after_review_decisions(served: Engine, paths: HostPaths, steered: Engine) -> None:
    _policy(paths)
    agent = _agent(served, paths)
    text = "Schema changes are backwards compatible for one release."
    kept, _ = _pending(agent, text)
    twin, _ = _pending(agent, text)
    dropped, _ = _pending(agent, "Temporary access expires after eight hours.")
    waiting, _ = _pending(agent, "This one is still waiting for a person.")
    review.accept_candidate(steered.deps, kept, decided_by=HOST)
    review.accept_candidate(steered.deps, twin, decided_by=HOST)
    review.reject_candidate(steered.deps, dropped, decided_by=HOST)

    events, head = journal_of(paths, SCOPE)
    assert journal.verify_chain(SCOPE, events) == head
    folded = journal.fold(events)
    assert folded.candidates == dict(rows(paths, "SELECT candidate_id, state FROM candidates"))
    assert folded.records == dict(rows(paths, "SELECT record_id, state FROM records"))
    assert folded.adjudication == {waiting}
    assert {c for (c,) in rows(paths, "SELECT candidate_id FROM candidates WHERE adjudication = 1")} == {waiting}
    host_events = [e for e in events if e.body["actor"] == host_actor(HOST)]
    assert [e.kind for e in host_events] == [
        journal.CANDIDATE_ACCEPTED,
        journal.CANDIDATE_DUPLICATE,
        journal.CANDIDATE_REJECTED,
    ]


# -- auto-accept rules ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "trusted", "untrusted", "reason"),
    [
        ("principals", {"principal": "carol"}, {"principal": "dave"}, "auto_accept:principal"),
        ("agents", {"agent_id": "agent-ci"}, {"agent_id": "agent-adhoc"}, "auto_accept:agent"),
        ("trust_classes", {"trust_class": "signed"}, {"trust_class": "earned"}, "auto_accept:trust_class"),
    ],
)
def test_auto_accept_rule_skips_review_only_for_what_it_names(
    served: Engine,
    paths: HostPaths,
    steered: Engine,
    rule: str,
    trusted: dict[str, str],
    untrusted: dict[str, str],
    reason: str,
) -> None:
    value = next(iter(trusted.values()))
    _policy(paths, **{rule: [value]})
    trusted_agent = _agent(served, paths, **trusted)
    other_agent = _agent(served, paths, **untrusted)
    accepted = trusted_agent.capture("Auto-accepted decisions still cite a source.")["candidate_id"]
    outcome = trusted_agent.admit(accepted)
    assert outcome["status"] == "accepted"
    assert _reasons_of(paths, accepted) == [reason]
    assert trusted_agent.found_ids("auto-accepted decisions cite source") == [outcome["record_id"]]
    held = other_agent.capture("Everyone else still waits for a person.")["candidate_id"]
    assert other_agent.admit(held)["status"] == "pending_adjudication"


def test_auto_accept_names_every_rule_that_matched(served: Engine, paths: HostPaths, steered: Engine) -> None:
    _policy(paths, principals=["alice"], trust_classes=["signed"])
    agent = _agent(served, paths, trust_class="signed")
    candidate_id = agent.capture("Both rules vouch for this one.")["candidate_id"]
    assert agent.admit(candidate_id)["status"] == "accepted"
    assert _reasons_of(paths, candidate_id) == ["auto_accept:principal", "auto_accept:trust_class"]


def test_auto_accept_table_changes_nothing_in_auto_mode(served: Engine, paths: HostPaths, steered: Engine) -> None:
    _policy(paths, mode="auto", principals=["alice"])
    alice, bob = _agent(served, paths), _agent(served, paths, principal="bob")
    for agent, text in ((alice, "Alice's note is accepted by the policy."), (bob, "Bob's note is accepted too.")):
        candidate_id = agent.capture(text)["candidate_id"]
        assert agent.admit(candidate_id)["status"] == "accepted"
        assert _reasons_of(paths, candidate_id) == ["policy_checks_passed"]


def test_auto_accept_never_overrides_rejections_or_the_tombstone_guard(
    served: Engine, paths: HostPaths, steered: Engine
) -> None:
    agent = _agent(served, paths)
    text = "The old queue service is decommissioned."
    forgotten = agent.remember(text)
    forget = {"record_id": forgotten, "idempotency_key": unique_key("forget"), "reason_ref": "reason:t"}
    agent.error_code("engram_memory_forget", forget)
    steered.approve_confirmation(steered.confirmations()[0][0].confirmation_id, decided_by=HOST, ttl_ms=60_000)
    agent.value("engram_memory_forget", forget)
    _policy(paths, principals=["alice"])

    leaked = agent.capture("Deploy key: ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8")["candidate_id"]
    assert agent.admit(leaked)["status"] == "rejected"
    guarded = agent.capture(text)["candidate_id"]
    assert agent.admit(guarded)["status"] == "pending_adjudication"
    assert _reasons_of(paths, guarded) == ["tombstone_guard"]


def test_decide_applies_auto_accept_after_every_other_rule() -> None:
    policy = AdmissionPolicy(mode="review", auto_accept=AutoAccept(agents=frozenset({"ci"}))).with_digest()
    facts = CandidateFacts(100, 1, False, (), principal="p", agent_id="ci", trust_class="asserted")
    assert decide(policy, facts, duplicate_of=None, tombstoned=False).reasons == ("auto_accept:agent",)
    assert decide(policy, facts, duplicate_of="mem_x", tombstoned=False).verdict is Verdict.DUPLICATE
    assert decide(policy, facts, duplicate_of=None, tombstoned=True).reasons == ("tombstone_guard",)
    oversized = CandidateFacts(10**9, 1, False, (), principal="p", agent_id="ci")
    assert decide(policy, oversized, duplicate_of=None, tombstoned=False).verdict is Verdict.REJECT
    stranger = CandidateFacts(100, 1, False, (), principal="p", agent_id="other")
    assert decide(policy, stranger, duplicate_of=None, tombstoned=False).reasons == ("review_mode",)


def test_policy_digest_changes_with_the_auto_accept_table() -> None:
    base = policy_from_mapping({})
    for rule in ("principals", "agents", "trust_classes"):
        value = "signed" if rule == "trust_classes" else "x"
        changed = policy_from_mapping({"auto_accept": {rule: [value]}})
        assert changed.digest != base.digest
        assert changed.as_mapping()["auto_accept"][rule] == [value]
    assert policy_from_mapping({"auto_accept": {"principals": []}}).digest == base.digest
    assert tomllib.loads(DEFAULT_POLICY_TOML)["auto_accept"] == {"principals": [], "agents": [], "trust_classes": []}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"auto_accept": ["alice"]}, "[auto_accept] must be a table"),
        ({"auto_accept": {"groups": []}}, "unknown policy key: auto_accept.groups"),
        ({"auto_accept": {"principals": "alice"}}, "auto_accept.principals must be a list of strings"),
        ({"auto_accept": {"agents": [1]}}, "auto_accept.agents must be a list of strings"),
        ({"auto_accept": {"principals": [""]}}, "auto_accept.principals and auto_accept.agents must not hold empty"),
        ({"auto_accept": {"trust_classes": ["trusted"]}}, "auto_accept.trust_classes names a trust class other"),
    ],
)
def test_invalid_auto_accept_table_is_a_policy_error(table: dict[str, Any], message: str) -> None:
    with pytest.raises(PolicyError) as raised:
        policy_from_mapping(table)
    assert str(raised.value).startswith(message)
