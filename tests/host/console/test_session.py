"""The console's door: nothing without a session, a login link that works once, CSRF and origin on every form."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from engram_memory.host.console.session import ConsoleSessions
from tests.host.console.conftest import BASE, Site

PAGES = ["/queue", "/confirmations", "/records", "/bindings", "/audit", "/health", "/records/mem_x", "/nowhere"]
FORMS = ["/queue/decide", "/confirmations/decide", "/records/search", "/bindings/revoke", "/health/verify", "/logout"]


@pytest.mark.parametrize("path", PAGES)
def test_a_page_without_a_session_is_sent_to_login(site: Site, path: str) -> None:
    answer = site.client.get(path, follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/login"
    assert "set-cookie" not in answer.headers


@pytest.mark.parametrize("path", FORMS)
def test_a_form_without_a_session_is_refused_with_the_constant_page(site: Site, path: str) -> None:
    answer = site.client.post(path, data={"csrf": "x", "decision": "accept"}, follow_redirects=False)
    assert answer.status_code == 401
    assert "Open the one-time link" in answer.text


def test_a_live_fragment_without_a_session_answers_401_not_a_redirect(site: Site) -> None:
    answer = site.client.get("/queue/live", headers={"X-Console-Fragment": "1"}, follow_redirects=False)
    assert answer.status_code == 401


def test_the_login_link_works_once_and_sets_a_strict_http_only_cookie(site: Site) -> None:
    token = site.sessions.login_token
    first = site.client.get(f"/login?token={token}", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/queue"
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    assert site.client.get("/queue").status_code == 200
    with TestClient(site.client.app, base_url=BASE) as other:
        again = other.get(f"/login?token={token}", follow_redirects=False)
        assert again.status_code == 401 and "set-cookie" not in again.headers
        assert other.get("/queue", follow_redirects=False).status_code == 303


@pytest.mark.parametrize("token", ["", "wrong", "x" * 500])
def test_a_wrong_login_token_opens_nothing_and_leaves_the_right_one_usable(site: Site, token: str) -> None:
    assert site.client.get(f"/login?token={token}", follow_redirects=False).status_code == 401
    site.login()


def test_a_forged_session_cookie_is_no_session(site: Site) -> None:
    site.client.cookies.set("engram_console", "forged")
    assert site.client.get("/queue", follow_redirects=False).status_code == 303


def test_a_form_without_its_csrf_token_is_refused_and_decides_nothing(signed_in: Site) -> None:
    candidate_id = signed_in.waiting("The staging database moves to the new cluster on Friday.")
    for form in ({"candidate_id": candidate_id, "decision": "accept"}, {"candidate_id": candidate_id, "csrf": "no"}):
        answer = signed_in.post("/queue/decide", {**form, "decision": "accept"}, csrf=False)
        assert answer.status_code == 403
    assert [row.candidate_id for row in signed_in.engine.review_queue(limit=10)] == [candidate_id]


def test_a_form_from_another_origin_is_refused_even_with_the_token(signed_in: Site) -> None:
    candidate_id = signed_in.waiting("Backups rotate weekly.")
    form = {"candidate_id": candidate_id, "decision": "reject", "csrf": signed_in.csrf()}
    answer = signed_in.client.post(
        "/queue/decide", data=form, headers={"Origin": "http://evil.example"}, follow_redirects=False
    )
    assert answer.status_code == 403
    assert [row.candidate_id for row in signed_in.engine.review_queue(limit=10)] == [candidate_id]


def test_a_host_header_that_is_not_loopback_is_refused(signed_in: Site) -> None:
    answer = signed_in.client.get("/queue", headers={"Host": "attacker.example:8765"}, follow_redirects=False)
    assert answer.status_code == 403


def test_a_form_over_the_size_limit_is_refused_before_it_is_read(signed_in: Site) -> None:
    answer = signed_in.client.post("/records/search", content=b"q=" + b"x" * 70_000, follow_redirects=False)
    assert answer.status_code == 413


def test_sign_out_ends_the_session(signed_in: Site) -> None:
    assert signed_in.post("/logout", {}).status_code == 401
    assert signed_in.client.get("/queue", follow_redirects=False).status_code == 303


def test_every_answer_carries_the_security_headers(signed_in: Site) -> None:
    for answer in (signed_in.client.get("/queue"), signed_in.client.get("/nowhere")):
        assert answer.headers["x-frame-options"] == "DENY"
        assert "default-src 'none'" in answer.headers["content-security-policy"]
        assert answer.headers["cache-control"] == "no-store"


def test_an_idle_session_ends(site: Site) -> None:
    now = [1000.0]
    sessions = ConsoleSessions(clock=lambda: now[0], idle_limit_s=60)
    session = sessions.redeem(sessions.login_token)
    assert session is not None and sessions.find(session.session_id) is session
    now[0] += 61
    assert sessions.find(session.session_id) is None
