"""Bindings, audit and health: what the host issued, what its agents did, how the store is."""

from __future__ import annotations

import html
import re

from engram_memory.engine.ports.store import AuditRow
from engram_memory.host.bindings import issued_row_of
from engram_memory.host.console.chart import HOUR_MS, hourly_chart
from tests.host.console.conftest import Site
from tests.support.homes import bind
from tests.support.payloads import PURPOSE


def _issued(site: Site) -> str:
    issued = bind(site.paths, principal="bob", agent_id="agent-7")
    site.engine.record_binding(issued_row_of(issued.binding, issued_by="host:test"))
    return issued.binding.token_id


def test_bindings_lists_what_was_issued_and_revoking_asks_first(signed_in: Site) -> None:
    token_id = _issued(signed_in)
    page = signed_in.client.get("/bindings").text
    assert token_id in page and "agent-7" in page and "active" in page
    asked = signed_in.post("/bindings/revoke", {"token_id": token_id})
    assert asked.status_code == 200 and 'name="confirmed" value="yes"' in asked.text
    assert "revoked" not in signed_in.client.get("/bindings").text.split("<tbody>")[1]
    done = signed_in.post("/bindings/revoke", {"token_id": token_id, "confirmed": "yes"})
    assert "Revoked" in done.headers["location"]
    assert "status-revoked" in signed_in.client.get("/bindings").text
    again = signed_in.post("/bindings/revoke", {"token_id": token_id, "confirmed": "yes"})
    assert "already" in again.headers["location"]


def test_revoking_something_that_is_not_a_token_id_of_this_home_is_refused(signed_in: Site) -> None:
    for token_id in ("bind_aaaaaaaaaaaaaaaa", "nonsense"):
        answer = signed_in.post("/bindings/revoke", {"token_id": token_id, "confirmed": "yes"})
        assert answer.status_code == 303 and "Revoked" not in answer.headers["location"]


def test_audit_filters_by_tool_outcome_binding_and_time(signed_in: Site) -> None:
    signed_in.remembered("Audited memory text must never show on the audit page.")
    signed_in.agent.call("engram_memory_get", {"record_id": "mem_missing", "purpose_ref": PURPOSE})
    everything = signed_in.client.get("/audit").text
    assert "capture" in everything and "must never show" not in everything
    captures = signed_in.client.get("/audit?tool=engram_memory_capture").text
    assert _count(captures) == 1
    refused = signed_in.client.get("/audit?outcome=refused").text
    assert _count(refused) >= 1 and "capture</td>" not in refused
    token = signed_in.agent.binding.token_id
    assert _count(signed_in.client.get(f"/audit?token_id={token}").text) == _count(everything)
    assert _count(signed_in.client.get("/audit?since=2999-01-01").text) == 0
    bad = html.unescape(signed_in.client.get("/audit?since=yesterday").text)
    assert "Not a date or ISO instant: since" in bad


def test_health_shows_counts_and_a_verification_on_request(signed_in: Site) -> None:
    signed_in.remembered("Counted, not shown.")
    page = signed_in.client.get("/health").text
    assert "Not verified since the console started." in page and "Counted, not shown." not in page
    assert re.search(r"<th scope=\"row\">current</th><td>1</td>", page)
    done = signed_in.post("/health/verify", {})
    assert "Verified" in done.headers["location"]
    assert "No problems" in signed_in.client.get("/health").text


def test_the_chart_counts_calls_per_hour_ok_and_refused() -> None:
    now = 100 * HOUR_MS + 60_000
    rows = [
        AuditRow("a1", now - 10, "engram_memory_search", "ok"),
        AuditRow("a2", now - 20, "engram_memory_search", "NOT_FOUND"),
        AuditRow("a3", now - 2 * HOUR_MS, "engram_memory_get", "ok"),
        AuditRow("a4", now - 30 * HOUR_MS, "engram_memory_get", "ok"),  # older than the day: left out
    ]
    chart = hourly_chart(rows, now)
    assert (chart.ok_total, chart.error_total, chart.peak) == (2, 1, 2)
    last = chart.bars[-1]
    assert (last.ok, last.errors, last.ok_height + last.error_height) == (1, 1, chart.height)


def _count(page: str) -> int:
    return page.split("<tbody>")[1].split("</tbody>", maxsplit=1)[0].count("<tr>")
