"""The console in a real browser with a real agent: Chromium headless against `engram-memory console`, and an
agent on `engram-memory serve` over MCP stdio, both on one home.

The page is never reloaded by the test while it waits for the agent's requests: they arrive through
the page's own refresh. Every page is saved as a screenshot (test-artefacts/console/).
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.wait import WebDriverWait

from engram_memory.contract.tools import Tool
from engram_memory.host.settings import HostPaths
from tests.host.console.browser import chromium, console_process, screenshot
from tests.host.console.conftest import review_mode
from tests.support.agents import StdioAgent
from tests.support.homes import bind
from tests.support.payloads import PURPOSE, capture_args, unique_key

pytestmark = [pytest.mark.process, pytest.mark.stdio]
WAIT_S = 30


@dataclass
class Scene:
    paths: HostPaths
    link: str
    browser: WebDriver
    agent: StdioAgent

    @property
    def base(self) -> str:
        return self.link.split("/login")[0]

    def open(self, path: str) -> None:
        self.browser.get(self.base + path)

    def wait_for(self, css: str) -> Any:
        return WebDriverWait(self.browser, WAIT_S).until(lambda b: b.find_element(By.CSS_SELECTOR, css))

    def wait_for_text(self, css: str, needle: str) -> str:
        """The text of the element once it holds `needle`: after a click the old page's element may still be
        found, then go stale as the new page replaces it, so each look finds it again."""
        waiting = WebDriverWait(
            self.browser, WAIT_S, ignored_exceptions=(NoSuchElementException, StaleElementReferenceException)
        )
        text: str = waiting.until(
            lambda b: (found := b.find_element(By.CSS_SELECTOR, css).text) and needle in found and found
        )
        return text

    def pending(self, text: str) -> str:
        candidate_id = str(self.agent.value(Tool.CAPTURE.value, capture_args(text))["candidate_id"])
        admitted = self.agent.value(
            Tool.REQUEST_ADMISSION.value, {"candidate_id": candidate_id, "idempotency_key": unique_key("admit")}
        )
        assert admitted["outcome"]["status"] == "pending_adjudication"
        return candidate_id

    def search(self, query: str) -> list[str]:
        found = self.agent.value(Tool.SEARCH.value, {"query": query, "purpose_ref": PURPOSE})
        return [packet["record"]["record_id"] for packet in found["records"]]


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """One Chromium for the module's scenes (starting one costs more than most scenes): each scene starts
    from a blank page with no cookies, so none sees another's session."""
    with chromium() as driver:
        yield driver


@contextmanager
def _signed_in(paths: HostPaths, browser: WebDriver) -> Iterator[Scene]:
    review_mode(paths)
    browser.get("about:blank")
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    with (
        console_process(paths.home) as link,
        StdioAgent(paths.home, bind(paths).token) as agent,
    ):
        browser.get(link)
        WebDriverWait(browser, WAIT_S).until(lambda b: b.current_url.endswith("/queue"))
        yield Scene(paths, link, browser, agent)


@pytest.fixture
def signed_in_any(paths: HostPaths, browser: WebDriver) -> Iterator[Scene]:
    """Signed in to a console on either store (the in-process tests cover every page on both)."""
    with _signed_in(paths, browser) as scene:
        yield scene


@pytest.fixture
def signed_in(sqlite_paths: HostPaths, browser: WebDriver) -> Iterator[Scene]:
    with _signed_in(sqlite_paths, browser) as scene:
        yield scene


def test_a_candidate_accepted_in_the_queue_is_found_by_the_agents_search(signed_in_any: Scene) -> None:
    signed_in = signed_in_any
    assert "No candidates are waiting" in signed_in.wait_for("main").text
    candidate_id = signed_in.pending("The quarterly planning offsite is in Gangneung; reply to ops@acme.io.")
    card = signed_in.wait_for(f"#c-{candidate_id}")  # arrives by the page's own refresh, no reload
    assert card.find_element(By.CSS_SELECTOR, "mark").text.startswith("ops@acme.io")
    screenshot(signed_in.browser, "queue")
    card.find_element(By.NAME, "reason").send_keys("ticket:OPS-12")
    card.find_element(By.CSS_SELECTOR, "button[value=accept]").click()
    notice = signed_in.wait_for_text("p.notice", "")
    assert notice.startswith(f"Accepted {candidate_id} as record mem_")
    record_id = notice.split("as record ")[1].rstrip(".")
    assert signed_in.search("planning offsite Gangneung") == [record_id]

    signed_in.open(f"/records/{record_id}")
    assert "ticket:OPS-12" in signed_in.wait_for("main").text
    screenshot(signed_in.browser, "record")


def test_a_forget_approved_in_the_page_lets_the_agents_retry_succeed(signed_in: Scene) -> None:
    candidate_id = signed_in.pending("The old office door code is 4471.")
    signed_in.wait_for(f"#c-{candidate_id} button[value=accept]").click()
    record_id = signed_in.wait_for_text("p.notice", "").split("as record ")[1].rstrip(".")
    forget = {"record_id": record_id, "idempotency_key": unique_key("forget"), "reason_ref": "reason:cleanup"}
    assert signed_in.agent.error_code(Tool.FORGET.value, forget) == "gate_failed"
    signed_in.open("/confirmations")
    request = signed_in.wait_for("article.confirmation")
    assert record_id in request.text and "The old office door code is 4471." in request.text
    screenshot(signed_in.browser, "confirmations")
    request.find_element(By.CSS_SELECTOR, "button[value=approve]").click()
    assert signed_in.wait_for_text("p.notice", "").startswith("Approved")
    assert signed_in.agent.value(Tool.FORGET.value, forget)["receipt"]["to_state"] == "tombstoned"
    assert signed_in.search("office door code") == []


def test_keyboard_only_approval(signed_in: Scene) -> None:
    candidate_id = signed_in.pending("Keyboard users approve too.")
    signed_in.wait_for(f"#c-{candidate_id} button[value=accept]").click()
    record_id = signed_in.wait_for_text("p.notice", "").split("as record ")[1].rstrip(".")
    forget = {"record_id": record_id, "idempotency_key": unique_key("forget"), "reason_ref": "reason:kbd"}
    assert signed_in.agent.error_code(Tool.FORGET.value, forget) == "gate_failed"
    signed_in.open("/confirmations")
    signed_in.wait_for("article.confirmation")
    keys = ActionChains(signed_in.browser)
    for _ in range(40):  # Tab through the page, as a person without a mouse does
        keys.send_keys(Keys.TAB).perform()
        focused = signed_in.browser.switch_to.active_element
        if focused.get_attribute("value") == "approve":
            break
    else:
        raise AssertionError("the Approve button is not reachable with Tab")
    keys.send_keys(Keys.ENTER).perform()
    assert signed_in.wait_for_text("p.notice", "").startswith("Approved")
    assert signed_in.agent.value(Tool.FORGET.value, forget)["receipt"]["to_state"] == "tombstoned"


def test_a_post_without_its_csrf_token_and_a_request_without_the_session_are_refused(signed_in: Scene) -> None:
    candidate_id = signed_in.pending("CSRF must not decide this.")
    card = signed_in.wait_for(f"#c-{candidate_id}")
    signed_in.browser.execute_script(
        "arguments[0].querySelector('input[name=csrf]').remove();", card.find_element(By.TAG_NAME, "form")
    )
    card.find_element(By.CSS_SELECTOR, "button[value=accept]").click()
    assert "Refused" in signed_in.wait_for_text("h1", "Refused")
    signed_in.open("/queue")
    assert signed_in.wait_for(f"#c-{candidate_id}")  # still waiting

    with chromium() as stranger:  # a browser without the session cookie
        stranger.get(signed_in.base + "/queue")
        WebDriverWait(stranger, WAIT_S).until(lambda b: b.current_url.endswith("/login"))
        assert "Sign-in needed" in stranger.find_element(By.TAG_NAME, "h1").text
        screenshot(stranger, "login-needed")
        stranger.get(signed_in.link)  # the link was used once already
        assert "Sign-in needed" in stranger.find_element(By.TAG_NAME, "h1").text
    forged = urllib.request.Request(
        signed_in.base + "/queue/decide",
        data=f"candidate_id={candidate_id}&decision=accept".encode(),
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(forged, timeout=10)
    assert refused.value.code == 401
    refused.value.close()


def test_every_page_renders_and_is_saved_as_a_screenshot(signed_in: Scene) -> None:
    signed_in.pending("배포는 매주 화요일 오전에 진행합니다. 发布列车每隔一个星期二出发。")
    for path, name in (
        ("/records?tenant=tenant-a&workspace=workspace-1", "records"),
        ("/bindings", "bindings"),
        ("/audit", "audit"),
        ("/health", "health"),
    ):
        signed_in.open(path)
        heading = signed_in.wait_for("h1").text
        assert heading and "Sign-in" not in heading and "wrong" not in heading
        screenshot(signed_in.browser, name)
    signed_in.wait_for("form[action='/health/verify'] button").click()
    assert signed_in.wait_for_text("p.notice", "Verified") == "Verified: no problems."
