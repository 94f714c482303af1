"""The review queue page: decrypted candidates with findings marked, accept and reject with a reason."""

from __future__ import annotations

import html
from urllib.parse import unquote_plus

from engram_memory.contract.tools import Tool
from tests.host.console.conftest import DECIDER, Site
from tests.support.homes import journal_of
from tests.support.payloads import PURPOSE

EMAIL = "dana.quill@acme.io"


def test_the_queue_shows_a_waiting_candidate_with_its_text_and_the_finding_marked(signed_in: Site) -> None:
    candidate_id = signed_in.waiting(f"Invoice disputes go to {EMAIL} <b>now</b>.")
    page = signed_in.client.get("/queue").text
    assert candidate_id in page and "the policy sends every candidate to review" in page
    assert f'<mark title="personal_data">{EMAIL}' in page
    assert "&lt;b&gt;now&lt;/b&gt;" in page and "<b>now</b>" not in page  # agent text is escaped
    live = signed_in.client.get("/queue/live", headers={"X-Console-Fragment": "1"})
    assert live.status_code == 200 and candidate_id in live.text and "<html" not in live.text
    # The page swaps its list only when this key changes: the same items give the same key.
    assert f'data-items="{live.headers["x-console-items"]}"' in page
    second = signed_in.waiting("Another candidate arrives.")
    later = signed_in.client.get("/queue/live", headers={"X-Console-Fragment": "1"})
    assert second in later.text and later.headers["x-console-items"] != live.headers["x-console-items"]


def test_the_queue_says_so_when_nothing_waits(signed_in: Site) -> None:
    assert "No candidates are waiting for review." in signed_in.client.get("/queue").text


def test_accepting_makes_a_searchable_record_and_journals_the_reason(signed_in: Site) -> None:
    candidate_id = signed_in.waiting("The quarterly planning offsite is in Gangneung this year.")
    answer = signed_in.post(
        "/queue/decide", {"candidate_id": candidate_id, "decision": "accept", "reason": "ticket:OPS-12"}
    )
    assert answer.status_code == 303 and answer.headers["location"].startswith("/queue?notice=Accepted")
    notice = signed_in.client.get(answer.headers["location"]).text
    assert f"Accepted {candidate_id} as record mem_" in html.unescape(notice)
    found = signed_in.agent.value(Tool.SEARCH.value, {"query": "planning offsite Gangneung", "purpose_ref": PURPOSE})
    assert len(found["records"]) == 1
    record_id = found["records"][0]["record"]["record_id"]
    events, _ = journal_of(signed_in.paths, signed_in.agent_scope())
    decided = events[-1].body
    assert decided["data"]["reason_ref"] == "ticket:OPS-12" and decided["actor"]["principal"] == DECIDER
    assert decided["data"]["record_id"] == record_id


def test_rejecting_destroys_the_candidate(signed_in: Site) -> None:
    candidate_id = signed_in.waiting("A memory nobody should keep.")
    answer = signed_in.post("/queue/decide", {"candidate_id": candidate_id, "decision": "reject"})
    assert "Rejected" in answer.headers["location"]
    assert signed_in.engine.review_queue(limit=10) == []


def test_a_second_decision_on_the_same_candidate_is_refused_with_a_notice(signed_in: Site) -> None:
    candidate_id = signed_in.waiting("Two people clicked at once.")
    signed_in.post("/queue/decide", {"candidate_id": candidate_id, "decision": "accept"})
    again = signed_in.post("/queue/decide", {"candidate_id": candidate_id, "decision": "reject"})
    assert again.status_code == 303 and "Not+decided" in again.headers["location"]


def test_an_unknown_candidate_or_choice_changes_nothing(signed_in: Site) -> None:
    candidate_id = signed_in.waiting("Still waiting.")
    for form in (
        {"candidate_id": "cand_nope", "decision": "accept"},
        {"candidate_id": candidate_id, "decision": "maybe"},
        {"decision": "accept"},
    ):
        assert signed_in.post("/queue/decide", form).status_code == 303
    assert [row.candidate_id for row in signed_in.engine.review_queue(limit=10)] == [candidate_id]


def test_a_reason_that_breaks_the_ref_rule_decides_nothing(signed_in: Site) -> None:
    candidate_id = signed_in.waiting("A reason too long.")
    answer = signed_in.post("/queue/decide", {"candidate_id": candidate_id, "decision": "accept", "reason": "e\u0301"})
    assert "INVALID_SCHEMA" in answer.headers["location"]
    assert [row.candidate_id for row in signed_in.engine.review_queue(limit=10)] == [candidate_id]


def test_an_unreadable_policy_leaves_the_candidate_waiting(signed_in: Site) -> None:
    candidate_id = signed_in.waiting("Policy trouble.")
    csrf = signed_in.csrf()
    signed_in.paths.policy.write_text("mode = [", encoding="utf-8")
    answer = signed_in.client.post(
        "/queue/decide", data={"candidate_id": candidate_id, "decision": "accept", "csrf": csrf}, follow_redirects=False
    )
    notice = unquote_plus(answer.headers["location"])
    assert notice.startswith("/queue?notice=POLICY_UNAVAILABLE: ") and "(policy.toml)" in notice
    assert str(signed_in.paths.home) not in notice


def test_korean_chinese_and_japanese_candidates_are_shown_whole(signed_in: Site) -> None:
    texts = [
        "배포는 매주 화요일 오전에 진행합니다.",
        "发布列车每隔一个星期二出发。",
        "リリースは毎週火曜日の朝に行います。",
    ]
    for text in texts:
        signed_in.waiting(text)
    page = signed_in.client.get("/queue").text
    assert all(text in page for text in texts)


def _family_policy(site: Site, mode: str) -> None:
    text = site.paths.policy.read_text(encoding="utf-8")
    text = text.replace("consented_families = []", 'consented_families = ["team:*"]')
    site.paths.policy.write_text(text + f'\n[[family_rules]]\npattern = "team:*"\nmode = "{mode}"\n', encoding="utf-8")


def _in_family(site: Site, text: str, t: int) -> str:
    captured = site.agent.capture(text, valid_from_ms=t, reconciliation={"family_refs": ["team:ingress"]})
    assert site.agent.admit(captured["candidate_id"])["status"] == "pending_adjudication"
    return str(captured["candidate_id"])


def test_a_family_pair_is_shown_side_by_side_and_accepting_with_supersede_retires_the_old(signed_in: Site) -> None:
    _family_policy(signed_in, "adjudicate")
    old = signed_in.engine.accept_candidate(
        _in_family(signed_in, "The platform team owns the ingress.", 1_700_000_000_000), decided_by=DECIDER
    ).record_id
    candidate_id = _in_family(signed_in, "The networking team owns the ingress.", 1_700_086_400_000)
    page = html.unescape(signed_in.client.get("/queue").text)
    assert "Beside the current memories it competes with" in page
    assert f"<code>{old}</code> · family team:ingress (adjudicate): kept unless superseded" in page
    assert "The platform team owns the ingress." in page and "The networking team owns the ingress." in page
    assert 'value="accept_supersede"' in page and 'value="accept_keep"' in page
    answer = signed_in.post("/queue/decide", {"candidate_id": candidate_id, "decision": "accept_supersede"})
    assert f"It superseded {old}." in html.unescape(signed_in.client.get(answer.headers["location"]).text)
    found = signed_in.agent.value(Tool.SEARCH.value, {"query": "team owns the ingress", "purpose_ref": PURPOSE})
    assert [p["record"]["record_id"] for p in found["records"]] != [old] and len(found["records"]) == 1


def test_accepting_a_family_pair_keeping_both_leaves_the_old_current(signed_in: Site) -> None:
    _family_policy(signed_in, "adjudicate")
    old = signed_in.engine.accept_candidate(
        _in_family(signed_in, "Staging refreshes nightly.", 1_700_000_000_000), decided_by=DECIDER
    ).record_id
    candidate_id = _in_family(signed_in, "Staging refreshes before each release.", 1_700_086_400_000)
    signed_in.post("/queue/decide", {"candidate_id": candidate_id, "decision": "accept_keep"})
    found = signed_in.agent.value(Tool.SEARCH.value, {"query": "staging refreshes", "purpose_ref": PURPOSE})
    assert old in [p["record"]["record_id"] for p in found["records"]] and len(found["records"]) == 2
