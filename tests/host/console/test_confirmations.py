"""The confirmations page: what will be destroyed, who asked, time left; approve lets the retry run once."""

from __future__ import annotations

import html

from engram_memory.contract.tools import Tool
from tests.host.console.conftest import Site
from tests.support.payloads import unique_key

FORGET = Tool.FORGET.value


def test_a_forget_request_shows_the_record_text_its_asker_and_the_time_left(signed_in: Site) -> None:
    record_id = signed_in.remembered("The on-call rota lives in the team wiki.")
    signed_in.forget_request(record_id)
    page = html.unescape(signed_in.client.get("/confirmations").text)
    assert record_id in page and "The on-call rota lives in the team wiki." in page
    assert "record body, record data key, lexical index entry" in page
    assert "Asked by <strong>alice</strong>" in page and "reason:cleanup" in page
    assert "59 min" in page or "60 min" in page
    live = signed_in.client.get("/confirmations/live", headers={"X-Console-Fragment": "1"})
    assert record_id in live.text and "<html" not in live.text


def test_approving_in_the_page_lets_the_agents_identical_retry_succeed_once(signed_in: Site) -> None:
    record_id = signed_in.remembered("A note to forget.")
    forget = signed_in.forget_request(record_id)
    [(row, _)] = signed_in.engine.confirmations()
    answer = signed_in.post(
        "/confirmations/decide", {"confirmation_id": row.confirmation_id, "decision": "approve", "ttl_s": "120"}
    )
    assert answer.status_code == 303 and "Approved" in answer.headers["location"]
    assert signed_in.agent.value(FORGET, forget)["receipt"]["to_state"] == "tombstoned"
    assert signed_in.engine.confirmations() == []


def test_denying_keeps_the_record_and_the_retry_is_refused(signed_in: Site) -> None:
    record_id = signed_in.remembered("A note to keep.")
    forget = signed_in.forget_request(record_id)
    [(row, _)] = signed_in.engine.confirmations()
    signed_in.post("/confirmations/decide", {"confirmation_id": row.confirmation_id, "decision": "deny"})
    assert signed_in.agent.error_code(FORGET, forget) != "ok"
    assert signed_in.engine.record_details(record_id).record.state == "accepted_current"


def test_a_withdraw_request_shows_the_candidates_text(signed_in: Site) -> None:
    pending = str(signed_in.agent.capture("Withdraw me before admission.")["candidate_id"])
    withdraw = {"candidate_id": pending, "idempotency_key": unique_key("withdraw"), "reason_ref": "reason:t"}
    assert signed_in.agent.error_code(Tool.WITHDRAW.value, withdraw) == "gate_failed"
    page = html.unescape(signed_in.client.get("/confirmations").text)
    assert "Withdraw me before admission." in page and "candidate body, candidate data key" in page


def test_a_bad_approval_changes_nothing(signed_in: Site) -> None:
    record_id = signed_in.remembered("Stay.")
    signed_in.forget_request(record_id)
    [(row, _)] = signed_in.engine.confirmations()
    for form in (
        {"confirmation_id": row.confirmation_id, "decision": "approve", "ttl_s": "301"},
        {"confirmation_id": row.confirmation_id, "decision": "approve", "ttl_s": "-1"},
        {"confirmation_id": row.confirmation_id, "decision": "perhaps"},
        {"confirmation_id": "conf_nope", "decision": "approve"},
    ):
        assert signed_in.post("/confirmations/decide", form).status_code == 303
    assert [item.confirmation_id for item, _ in signed_in.engine.confirmations()] == [row.confirmation_id]


def test_the_page_says_so_when_nothing_waits(signed_in: Site) -> None:
    assert "No requests are waiting for a decision." in signed_in.client.get("/confirmations").text
