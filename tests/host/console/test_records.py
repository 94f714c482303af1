"""The records pages: browse (metadata only), search as the agents do (POST), one record, its actions, export."""

from __future__ import annotations

import html
import json

from engram_memory.contract.tools import Tool
from tests.host.console.conftest import DECIDER, Site
from tests.support.payloads import PURPOSE


def test_browsing_lists_records_with_their_text_cut_short_through_audited_host_reads(signed_in: Site) -> None:
    record_id = signed_in.remembered("The secret handshake is two knocks and a pause.")
    long_id = signed_in.remembered("회의록: " + "배포 전에 두 명의 승인이 필요합니다. " * 10)
    page = html.unescape(
        signed_in.client.get("/records?tenant=tenant-a&workspace=workspace-1&state=accepted_current").text
    )
    assert record_id in page and ">current<" in page and "The secret handshake is two knocks and a pause." in page
    assert long_id in page and "회의록: 배포 전에" in page and "…" in page
    assert ("배포 전에 두 명의 승인이 필요합니다. " * 10).strip() not in page
    reads = [row for row in _audit(signed_in) if row.tool == Tool.GET.value and row.principal == DECIDER]
    assert len(reads) == 2 and all(row.token_id == "host-read" for row in reads)
    assert record_id not in signed_in.client.get("/records?tenant=tenant-b").text


def test_searching_finds_what_an_agent_would_and_keeps_the_words_out_of_the_address(signed_in: Site) -> None:
    record_id = signed_in.remembered("서울 사무실의 와이파이 비밀번호는 매달 바뀝니다.")
    answer = signed_in.post(
        "/records/search", {"tenant": "tenant-a", "workspace": "workspace-1", "query": "와이파이 비밀번호"}
    )
    assert answer.status_code == 200 and str(answer.url).endswith("/records/search")
    page = html.unescape(answer.text)
    assert record_id in page and "서울 사무실의 와이파이 비밀번호는 매달 바뀝니다." in page
    searches = [row for row in _audit(signed_in) if row.tool == Tool.SEARCH.value and row.principal == DECIDER]
    assert len(searches) == 1 and searches[0].outcome == "ok"


def test_a_search_without_its_scope_says_what_is_missing(signed_in: Site) -> None:
    page = signed_in.post("/records/search", {"query": "anything"}).text
    assert "Name a tenant, a workspace and what to look for." in page


def test_a_record_page_shows_text_citations_and_history(signed_in: Site) -> None:
    record_id = signed_in.remembered("Deploys need two approvals.")
    page = html.unescape(signed_in.client.get(f"/records/{record_id}").text)
    assert "Deploys need two approvals." in page and "<dd>current</dd>" in page
    assert "accept" in page and DECIDER in page
    assert signed_in.client.get("/records/mem_nothere").status_code == 404


def test_a_maintenance_action_asks_first_then_runs_and_the_history_shows_it(signed_in: Site) -> None:
    record_id = signed_in.remembered("An outdated runbook step.")
    form = {"operation": "dispute", "reason": "ticket:OPS-9"}
    asked = signed_in.post(f"/records/{record_id}/action", form)
    assert asked.status_code == 200 and 'name="confirmed" value="yes"' in asked.text
    assert signed_in.engine.record_details(record_id).record.state == "accepted_current"
    done = signed_in.post(f"/records/{record_id}/action", {**form, "confirmed": "yes"})
    assert done.status_code == 303 and "accepted_disputed" in done.headers["location"]
    page = signed_in.client.get(f"/records/{record_id}").text
    assert "ticket:OPS-9" in page and "<dd>disputed</dd>" in page


def test_tombstone_from_the_page_erases_and_the_agent_finds_nothing(signed_in: Site) -> None:
    record_id = signed_in.remembered("Forget the old office door code 4471.")
    signed_in.post(f"/records/{record_id}/action", {"operation": "tombstone", "confirmed": "yes"})
    assert signed_in.engine.record_details(record_id).record.state == "tombstoned"
    found = signed_in.agent.value(Tool.SEARCH.value, {"query": "office door code", "purpose_ref": PURPOSE})
    assert found["records"] == []


def test_a_refused_or_unknown_action_changes_nothing(signed_in: Site) -> None:
    record_id = signed_in.remembered("Stays current.")
    for form in (
        {"operation": "rewind", "confirmed": "yes"},
        {"operation": "supersede", "confirmed": "yes"},
        {"operation": "explode", "confirmed": "yes"},
        {"operation": "dispute", "reason": "x" * 600, "confirmed": "yes"},
    ):
        assert signed_in.post(f"/records/{record_id}/action", form).status_code == 303
    assert signed_in.engine.record_details(record_id).record.state == "accepted_current"


def test_export_answers_the_export_lines_of_the_workspace(signed_in: Site) -> None:
    record_id = signed_in.remembered("发布列车每隔一个星期二出发。")
    answer = signed_in.client.get("/records/export?tenant=tenant-a&workspace=workspace-1")
    assert answer.status_code == 200 and "attachment" in answer.headers["content-disposition"]
    [line] = [json.loads(text) for text in answer.text.splitlines()]
    assert line["record_id"] == record_id and line["memory"]["components"][0]["text"] == "发布列车每隔一个星期二出发。"
    assert signed_in.client.get("/records/export?tenant=tenant-a").status_code == 400


def _audit(site: Site) -> list:  # type: ignore[type-arg]
    with site.engine.audit_rows(None, None) as rows:
        return list(rows)
