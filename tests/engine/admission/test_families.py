"""Reconciliation families at admission (issue 20), in-process on both stores: supersede, adjudicate and
coexist; replay; the tombstone guard; the review of an adjudicated pair; isolation between scopes."""

from __future__ import annotations

from typing import Any

from engram_memory.contract.tools import Tool
from engram_memory.engine.engine import Engine
from engram_memory.engine.ports.store import Scope
from engram_memory.host.policy_file import DEFAULT_POLICY_TOML
from engram_memory.host.settings import HostPaths
from tests.support.clocks import ManualClock
from tests.support.homes import bind, journal_of
from tests.support.inprocess import InProcessAgent
from tests.support.payloads import unique_key
from tests.support.raw import rows

SCOPE = Scope(tenant="tenant-a", workspace="workspace-1")
ADMIT = Tool.REQUEST_ADMISSION.value
HOST = "host:reviewer"
DAY = 86_400_000
T0 = 1_700_000_000_000


def _policy(paths: HostPaths, *rules: tuple[str, str], mode: str = "auto") -> None:
    text = DEFAULT_POLICY_TOML.replace('mode = "auto"', f'mode = "{mode}"')
    text = text.replace("consented_families = []", 'consented_families = ["fact:*", "team:*"]')
    for pattern, rule in rules:
        text += f'\n[[family_rules]]\npattern = "{pattern}"\nmode = "{rule}"\n'
    paths.policy.write_text(text, encoding="utf-8")


def _agent(served: Engine, paths: HostPaths, workspace: str = "workspace-1") -> InProcessAgent:
    return InProcessAgent(served, bind(paths, workspace=workspace).binding)


def _families(*refs: str) -> dict[str, Any]:
    return {"family_refs": sorted(refs)}


def _admitted(agent: InProcessAgent, text: str, t: int, *refs: str, key: str | None = None) -> dict[str, Any]:
    candidate_id = agent.capture(text, valid_from_ms=t, reconciliation=_families(*refs))["candidate_id"]
    args = {"candidate_id": candidate_id, "idempotency_key": key or unique_key("admit")}
    outcome: dict[str, Any] = agent.value(ADMIT, args)["outcome"]
    return outcome


def _state(paths: HostPaths, record_id: str) -> tuple[str, str | None]:
    [(state, successor)] = rows(paths, "SELECT state, superseded_by FROM records WHERE record_id = ?", record_id)
    return str(state), successor


def test_a_newer_fact_supersedes_the_older_in_one_transaction(served: Engine, paths: HostPaths) -> None:
    _policy(paths, ("fact:*", "supersede"))
    agent = _agent(served, paths)
    old = _admitted(agent, "The deploy window opens on Tuesdays.", T0, "fact:deploy-window")
    new = _admitted(agent, "The deploy window opens on Thursdays.", T0 + DAY, "fact:deploy-window")
    assert old["status"] == new["status"] == "accepted"
    assert new["superseded_record_ids"] == [old["record_id"]]
    assert "superseded_record_ids" not in old
    assert _state(paths, old["record_id"]) == ("historical", new["record_id"])
    assert agent.found_ids("deploy window opens") == [new["record_id"]]
    assert agent.get(old["record_id"])["error"]["code"] == "NOT_FOUND"

    events, head = journal_of(paths, SCOPE)
    moved = [
        e for e in events if e.body["data"].get("record_id") == old["record_id"] and e.kind == "record.transitioned"
    ]
    assert len(moved) == 1
    data = moved[0].body["data"]
    assert (data["operation"], data["from_state"], data["to_state"]) == ("supersede", "accepted_current", "historical")
    assert data["superseded_by"] == new["record_id"]
    assert data["decision_receipt_digest"] == new["decision_receipt_digest"]
    assert head is not None and new["cursor"] == head.cursor == moved[0].cursor


def test_a_replayed_admission_answers_the_same_and_supersedes_nothing_more(served: Engine, paths: HostPaths) -> None:
    _policy(paths, ("fact:*", "supersede"))
    agent = _agent(served, paths)
    old = _admitted(agent, "Backups run at 02:00 UTC.", T0, "fact:backup-time")
    candidate_id = agent.capture(
        "Backups run at 03:00 UTC.", valid_from_ms=T0 + DAY, reconciliation=_families("fact:backup-time")
    )["candidate_id"]
    args = {"candidate_id": candidate_id, "idempotency_key": unique_key("admit")}
    first = agent.value(ADMIT, args)
    before = len(journal_of(paths, SCOPE)[0])
    again = agent.value(ADMIT, args)
    assert again["replayed"] is True and again["outcome"] == first["outcome"]
    assert first["outcome"]["superseded_record_ids"] == [old["record_id"]]
    assert len(journal_of(paths, SCOPE)[0]) == before


def test_older_news_does_not_displace_a_newer_current_fact(served: Engine, paths: HostPaths) -> None:
    _policy(paths, ("fact:*", "supersede"))
    agent = _agent(served, paths)
    newer = _admitted(agent, "The on-call rotation is weekly.", T0 + 10 * DAY, "fact:on-call")
    older = _admitted(agent, "The on-call rotation is daily.", T0, "fact:on-call")
    assert older["status"] == "pending_adjudication"
    assert _state(paths, newer["record_id"]) == ("accepted_current", None)


def test_adjudicate_sends_the_candidate_to_a_person_who_sees_both(
    served: Engine, steered: Engine, paths: HostPaths
) -> None:
    _policy(paths, ("team:*", "adjudicate"))
    agent = _agent(served, paths)
    old = _admitted(agent, "The platform team owns the ingress.", T0, "team:ingress")
    waiting = _admitted(agent, "The networking team owns the ingress.", T0 + DAY, "team:ingress")
    assert waiting["status"] == "pending_adjudication"
    view = steered.candidate_view(waiting["candidate_id"])
    [member] = view.family_members
    assert (member.record_id, member.family_ref, member.mode) == (old["record_id"], "team:ingress", "adjudicate")
    assert member.payload["components"][0]["text"] == "The platform team owns the ingress."
    assert not member.superseded_on_accept
    assert steered.review_queue()[0].review_reasons == ("family_review",)

    decided = steered.accept_candidate(waiting["candidate_id"], decided_by=HOST, supersede=True)
    assert _state(paths, old["record_id"]) == ("historical", decided.record_id)
    assert agent.found_ids("team owns the ingress") == [decided.record_id]


def test_a_person_may_keep_both_or_reject(served: Engine, steered: Engine, paths: HostPaths) -> None:
    _policy(paths, ("team:*", "adjudicate"))
    agent = _agent(served, paths)
    old = _admitted(agent, "Staging is refreshed nightly.", T0, "team:staging")
    both = _admitted(agent, "Staging is refreshed before each release.", T0 + DAY, "team:staging")
    kept = steered.accept_candidate(both["candidate_id"], decided_by=HOST, supersede=False)
    assert _state(paths, old["record_id"]) == ("accepted_current", None)
    assert sorted(agent.found_ids("staging refreshed")) == sorted([old["record_id"], str(kept.record_id)])
    third = _admitted(agent, "Staging is never refreshed.", T0 + 2 * DAY, "team:staging")
    rejected = steered.reject_candidate(third["candidate_id"], decided_by=HOST)
    assert rejected.status == "rejected"
    assert _state(paths, old["record_id"]) == ("accepted_current", None)


def test_families_without_a_rule_coexist(served: Engine, paths: HostPaths) -> None:
    _policy(paths)
    agent = _agent(served, paths)
    first = _admitted(agent, "Invoices go out on the 1st.", T0, "fact:invoices")
    second = _admitted(agent, "Invoices go out on the 5th.", T0 + DAY, "fact:invoices")
    assert second["status"] == "accepted" and "superseded_record_ids" not in second
    assert _state(paths, first["record_id"]) == ("accepted_current", None)


def test_a_family_never_reaches_into_another_workspace(served: Engine, paths: HostPaths) -> None:
    _policy(paths, ("fact:*", "supersede"))
    here = _admitted(_agent(served, paths), "Retros happen on Fridays.", T0, "fact:retro")
    there = _admitted(_agent(served, paths, "workspace-2"), "Retros happen on Mondays.", T0 + DAY, "fact:retro")
    assert "superseded_record_ids" not in there
    assert _state(paths, here["record_id"]) == ("accepted_current", None)


def test_the_store_keeps_keyed_family_digests_never_the_refs(served: Engine, paths: HostPaths) -> None:
    _policy(paths, ("fact:*", "supersede"))
    record = _admitted(_agent(served, paths), "Alerts page the primary first.", T0, "fact:alert-order")
    keys = rows(paths, "SELECT family_key FROM record_families WHERE record_id = ?", record["record_id"])
    assert len(keys) == 1 and keys[0][0].startswith("fam1:") and "alert-order" not in keys[0][0]


def test_the_tombstone_guard_holds_forgotten_content_whatever_its_family_says(
    served: Engine, steered: Engine, paths: HostPaths, clock: ManualClock
) -> None:
    _policy(paths, ("fact:*", "supersede"))
    agent = _agent(served, paths)
    old = _admitted(agent, "The VPN certificate rotates yearly.", T0, "fact:vpn-cert")
    steered.transition("tombstone", old["record_id"], decided_by=HOST, reason_ref="ticket:9")
    assert rows(paths, "SELECT family_key FROM record_families WHERE record_id = ?", old["record_id"]) == []
    clock.advance(1000)
    back = _admitted(agent, "The VPN certificate rotates yearly.", T0 + DAY, "fact:vpn-cert")
    assert back["status"] == "pending_adjudication"
    assert steered.review_queue()[0].review_reasons == ("tombstone_guard",)


def test_review_mode_acceptance_follows_the_supersede_rule(served: Engine, steered: Engine, paths: HostPaths) -> None:
    _policy(paths, ("fact:*", "supersede"), mode="review")
    agent = _agent(served, paths)
    first = _admitted(agent, "Code freeze starts on the 10th.", T0, "fact:freeze")
    old = steered.accept_candidate(first["candidate_id"], decided_by=HOST)
    key = unique_key("admit")
    second = _admitted(agent, "Code freeze starts on the 12th.", T0 + DAY, "fact:freeze", key=key)
    view = steered.candidate_view(second["candidate_id"])
    assert [m.superseded_on_accept for m in view.family_members] == [True]
    new = steered.accept_candidate(second["candidate_id"], decided_by=HOST)
    assert _state(paths, str(old.record_id)) == ("historical", new.record_id)
    # The agent's own retry replays the person's decision, superseded record included.
    replayed = agent.value(ADMIT, {"candidate_id": second["candidate_id"], "idempotency_key": key})["outcome"]
    assert (replayed["status"], replayed["record_id"]) == ("accepted", new.record_id)
    assert replayed["superseded_record_ids"] == [old.record_id]


def test_an_as_of_read_sees_the_older_record_before_the_supersession_and_the_newer_after(
    served: Engine, steered: Engine, paths: HostPaths
) -> None:
    _policy(paths, ("fact:*", "supersede"))
    agent = _agent(served, paths)
    old = _admitted(agent, "The release branch is cut on Mondays.", T0, "fact:branch-cut")
    before = steered.records_valid_at(SCOPE, T0 + 5 * DAY, family_ref="fact:branch-cut")
    assert [item.record.record_id for item in before] == [old["record_id"]]
    new = _admitted(agent, "The release branch is cut on Wednesdays.", T0 + 3 * DAY, "fact:branch-cut")

    def true_at(t: int) -> list[str]:
        return [item.record.record_id for item in steered.records_valid_at(SCOPE, t, family_ref="fact:branch-cut")]

    assert true_at(T0 - 1) == []
    assert true_at(T0) == [old["record_id"]]
    assert true_at(T0 + 3 * DAY - 1) == [old["record_id"]]
    assert true_at(T0 + 3 * DAY) == [new["record_id"]]
    assert true_at(T0 + 5 * DAY) == [new["record_id"]]
    [superseded] = steered.records_valid_at(SCOPE, T0 + DAY)
    assert (superseded.valid_until_ms, superseded.until_inclusive) == (T0 + 3 * DAY, False)
    assert steered.records_valid_at(Scope("tenant-a", "workspace-2"), T0 + DAY, family_ref="fact:branch-cut") == []

    # A host rewind swaps them back: the older record is current again and open-ended.
    steered.transition("rewind", old["record_id"], decided_by=HOST)
    assert true_at(T0 + 5 * DAY) == [old["record_id"]]


def test_an_as_of_read_as_the_store_knew_it_before_the_supersession_still_sees_the_older_record(
    served: Engine, steered: Engine, paths: HostPaths, clock: ManualClock
) -> None:
    _policy(paths, ("fact:*", "supersede"))
    agent = _agent(served, paths)
    before_anything = clock.now_ms()
    clock.advance(1000)
    old = _admitted(agent, "The on-call handover is at 09:00.", T0, "fact:handover")
    clock.advance(60_000)
    between = clock.now_ms()
    clock.advance(60_000)
    superseded_at = clock.now_ms()
    new = _admitted(agent, "The on-call handover is at 10:00.", T0 + DAY, "fact:handover")

    def known(at_ms: int, valid_ms: int = T0 + 5 * DAY) -> list[str]:
        found = steered.records_valid_at(SCOPE, valid_ms, family_ref="fact:handover", known_at_ms=at_ms)
        return [item.record.record_id for item in found]

    assert known(before_anything) == []
    assert known(between) == [old["record_id"]]  # current then, whatever the valid time
    assert known(superseded_at) == [new["record_id"]]
    assert known(superseded_at, T0 + DAY - 1) == [old["record_id"]]  # valid time before the new one starts
    steered.transition("tombstone", old["record_id"], decided_by=HOST, reason_ref="ticket:9")
    assert known(between) == []  # forgotten content does not come back through history
