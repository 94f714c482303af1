"""The console in the person's language: its own setting (a cookie) first, then the browser's
Accept-Language; every page, notice and refusal follows it, and memory text is shown as it was written."""

from __future__ import annotations

import html
from urllib.parse import unquote_plus

from engram_memory.contract.tools import Tool
from tests.host.console.conftest import Site
from tests.support.payloads import PURPOSE


def _page(site: Site, path: str, language: str | None = None) -> str:
    headers = {} if language is None else {"Accept-Language": language}
    answer = site.client.get(path, headers=headers)
    assert answer.status_code == 200, answer.text
    return html.unescape(answer.text)


def test_the_browsers_accept_language_chooses_the_pages_language(signed_in: Site) -> None:
    korean = _page(signed_in, "/queue", "ko-KR,ko;q=0.9,en;q=0.5")
    assert '<html lang="ko">' in korean and "<h1>검토 대기열</h1>" in korean and "로그아웃" in korean
    traditional = _page(signed_in, "/health", "zh-TW,zh;q=0.9")
    assert '<html lang="zh-Hant">' in traditional and "<h1>健康狀況</h1>" in traditional
    simplified = _page(signed_in, "/records", "zh-CN")
    assert '<html lang="zh-Hans">' in simplified and "<h1>记录</h1>" in simplified
    japanese = _page(signed_in, "/audit", "ja")
    assert '<html lang="ja">' in japanese and "<h1>監査ログ</h1>" in japanese
    english = _page(signed_in, "/queue", "fr-FR")
    assert '<html lang="en">' in english and "<h1>Review queue</h1>" in english


def test_the_consoles_own_setting_outranks_the_browser_and_returns_to_the_page(signed_in: Site) -> None:
    chosen = signed_in.client.get("/language?to=ja&back=/records", follow_redirects=False)
    assert chosen.status_code == 303 and chosen.headers["location"] == "/records"
    assert "engram_lang=ja" in chosen.headers["set-cookie"] and "SameSite=strict" in chosen.headers["set-cookie"]
    assert "<h1>レコード</h1>" in _page(signed_in, "/records", "ko")
    page = _page(signed_in, "/bindings")
    assert 'href="/language?to=ko&back=/bindings"' in page and 'lang="ko"' in page and "한국어" in page


def test_the_setting_never_sends_a_person_elsewhere_and_refuses_unknown_languages(signed_in: Site) -> None:
    for back in ("//evil.example/x", "https://evil.example/", "/\\evil.example", ""):
        answer = signed_in.client.get("/language", params={"to": "ko", "back": back}, follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/queue", back
    assert signed_in.client.get("/language?to=fr&back=/queue", follow_redirects=False).status_code == 400


def test_refusals_and_notices_speak_the_language_too(signed_in: Site) -> None:
    missing = signed_in.client.get("/nothing-here", headers={"Accept-Language": "ko"})
    assert missing.status_code == 404 and "찾을 수 없음" in missing.text
    candidate_id = signed_in.waiting("The staging database is rebuilt every night.")
    csrf = signed_in.csrf()
    decided = signed_in.client.post(
        "/queue/decide",
        data={"csrf": csrf, "candidate_id": candidate_id, "decision": "reject"},
        headers={"Accept-Language": "zh-CN"},
        follow_redirects=False,
    )
    assert f"已拒绝 {candidate_id}：其正文已销毁。" in unquote_plus(decided.headers["location"])


def test_memory_text_and_codes_stay_as_written_in_a_translated_page(signed_in: Site) -> None:
    record_id = signed_in.remembered("Deploys need two approvals. 배포에는 승인 두 개가 필요합니다.")
    page = _page(signed_in, f"/records/{record_id}", "ja")
    assert "Deploys need two approvals. 배포에는 승인 두 개가 필요합니다." in page
    assert "<dt>状態</dt><dd>現在</dd>" in page and f"<code>{record_id}</code>" in page
    assert " UTC" in page and "年" not in page  # 2026/12/07 10:54:29 UTC: Japanese writes dates with slashes


def test_the_audit_page_shows_agents_calls_unless_asked_for_the_hosts_reads(signed_in: Site) -> None:
    record_id = signed_in.remembered("Audited, and read by the host once.")
    signed_in.agent.call(Tool.SEARCH.value, {"query": "audited", "purpose_ref": PURPOSE})
    _page(signed_in, f"/records/{record_id}")  # an audited host read
    agents = _page(signed_in, "/audit")
    assert "host-read" not in agents and "search" in agents
    host = _page(signed_in, "/audit?caller=host")
    assert "host-read" in host and host.count("<tr><td>") == 1
    everyone = _page(signed_in, "/audit?caller=all")
    assert "host-read" in everyone and everyone.count("<tr><td>") > host.count("<tr><td>")
    assert 'value="agents" selected' in _page(signed_in, "/audit?caller=nonsense")


def test_the_second_steps_ask_in_the_language_too(signed_in: Site) -> None:
    """The confirmation pages a revoke opens, which the browser tour reaches only with a grant to revoke."""
    asked = signed_in.client.post(
        "/apps/revoke",
        data={"csrf": signed_in.csrf(), "grant_id": "grant_" + "a" * 24},
        headers={"Accept-Language": "ko"},
    )
    page = html.unescape(asked.text)
    assert asked.status_code == 200 and "을(를) 폐기할까요?" in page and "되돌릴 수 없습니다." in page
    revoke = signed_in.client.post(
        "/bindings/revoke",
        data={"csrf": signed_in.csrf(), "token_id": "bind_" + "a" * 16},
        headers={"Accept-Language": "zh-CN"},
    )
    assert "此操作无法撤销。" in html.unescape(revoke.text)
