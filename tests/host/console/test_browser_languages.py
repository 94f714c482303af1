"""Every console page in Korean and in Simplified Chinese, in Chromium against the real `engram-memory console`:
the language chosen in the page's own setting, each page saved as a screenshot (test-artefacts/console/),
its words checked to be that language's, and its layout checked to hold a long line of CJK text."""

from __future__ import annotations

import re
from collections.abc import Iterator

import opencc
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import Select
from selenium.webdriver.support.wait import WebDriverWait

from engram_memory.contract.tools import Tool
from engram_memory.host.settings import HostPaths
from tests.host.clirun import cli
from tests.host.console.browser import chromium, console_process, screenshot
from tests.host.console.conftest import DECIDER, review_mode
from tests.support.agents import StdioAgent
from tests.support.homes import bind, engine_for
from tests.support.payloads import capture_args, unique_key

pytestmark = [pytest.mark.process, pytest.mark.stdio]
WAIT_S = 30
SCRIPTS = {"ko": re.compile(r"[\uac00-\ud7a3]"), "zh-Hans": re.compile(r"[\u4e00-\u9fff]")}
# One unbroken line of Korean and Chinese, longer than any page is wide.
LONG_CJK = "배포파이프라인의승인단계는두명의검토자가필요하며" * 6 + "发布流水线的审批阶段需要两名审核人" * 6
_TO_SIMPLIFIED = opencc.OpenCC("t2s")

# The words a person reads on the page: headings, labels, buttons, captions, notes and menus, without the
# codes, ids and names inside them (<code>, the other languages' names in the language menu, the tools).
_WORDS_JS = """
const picked = document.querySelectorAll(
  'h1, h2, h3, th, label, button, caption, summary, dt, .lead, .hint, .empty, .notice, p.meta, p.warn, '
  + '.top nav:not(.languages) a, .brand, option, .reasons li, a, p');
const texts = [];
for (const element of picked) {
  if (element.closest('nav.languages, code, #a-tool, .text, .hits, td.preview, pre')) continue;
  const copy = element.cloneNode(true);
  copy.querySelectorAll('code, .text, .tag').forEach(node => node.remove());
  const text = copy.textContent.replace(/\\s+/g, ' ').trim();
  if (text) texts.push(text);
}
return texts;
"""


def untranslated(texts: list[str], language: str) -> list[str]:
    """Texts with a word of Latin letters and nothing in the language's script (a code alone is not a word)."""
    script = SCRIPTS[language]
    words = re.compile(r"(?<![\w./:@-])[A-Za-z]{2,}(?![\w./:@-])")
    exempt = {"engram-memory", "ok", "UTC", "JSON", "lines", "refused"}
    return [
        text
        for text in texts
        if not script.search(text)
        and any(word not in exempt for word in words.findall(text.replace("engram-memory", "")))
    ]


def test_the_untranslated_check_sees_english_and_lets_codes_be() -> None:
    assert untranslated(["Review queue", "검토 대기열", "tenant-a/workspace-1", "mem_abc"], "ko") == ["Review queue"]


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with chromium() as driver:
        yield driver


class Tour:
    def __init__(self, browser: WebDriver, base: str, language: str) -> None:
        self.browser, self.base, self.language = browser, base, language

    def open(self, path: str) -> None:
        self.browser.get(self.base + path)
        WebDriverWait(self.browser, WAIT_S).until(lambda b: b.find_element(By.CSS_SELECTOR, "h1"))

    def check(self, name: str) -> None:
        assert self.browser.find_element(By.TAG_NAME, "html").get_attribute("lang") == self.language
        texts: list[str] = self.browser.execute_script(_WORDS_JS)
        assert texts and untranslated(texts, self.language) == [], (name, untranslated(texts, self.language))
        if self.language == "zh-Hans":
            joined = "\n".join(texts)
            assert _TO_SIMPLIFIED.convert(joined) == joined, name
        overflow = self.browser.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0, (name, overflow)  # a long CJK line wraps instead of widening the page
        screenshot(self.browser, f"{self.language}-{name}")


@pytest.mark.parametrize("language", ["ko", "zh-Hans"])
def test_every_console_page_speaks_the_language_chosen(
    sqlite_paths: HostPaths, browser: WebDriver, language: str
) -> None:
    paths = sqlite_paths
    review_mode(paths)
    browser.get("about:blank")
    browser.execute_cdp_cmd("Network.clearBrowserCookies", {})
    with console_process(paths.home) as link, StdioAgent(paths.home, bind(paths).token) as agent:
        record_ids = []
        for text in (LONG_CJK, "Deploys need two approvals. 배포에는 승인 두 개가 필요합니다.", "staging 每晚重建。"):
            candidate_id = agent.value(Tool.CAPTURE.value, capture_args(text))["candidate_id"]
            agent.value(
                Tool.REQUEST_ADMISSION.value, {"candidate_id": candidate_id, "idempotency_key": unique_key("a")}
            )
            record_ids.append(candidate_id)
        with engine_for(paths) as engine:
            accepted = [engine.accept_candidate(c, decided_by=DECIDER).record_id for c in record_ids[:2]]
        forget = {"record_id": accepted[1], "idempotency_key": unique_key("forget"), "reason_ref": "reason:cleanup"}
        assert agent.error_code(Tool.FORGET.value, forget) == "gate_failed"
        listed = (
            "--tenant",
            "tenant-a",
            "--workspace",
            "workspace-1",
            "--principal",
            "alice",
            "--agent",
            "claude-code",
        )
        assert cli("bind", *listed, "--session", "laptop", "--purpose", "purpose:notes", "--home", paths.home).code == 0

        browser.get(link)
        WebDriverWait(browser, WAIT_S).until(lambda b: b.current_url.endswith("/queue"))
        base = link.split("/login")[0]
        tour = Tour(browser, base, language)
        tour.open(f"/language?to={language}&back=/queue")
        tour.check("queue")
        for path, name in (
            ("/confirmations", "confirmations"),
            ("/records?tenant=tenant-a&workspace=workspace-1", "records"),
            (f"/records/{accepted[0]}", "record"),
            ("/bindings", "bindings"),
            ("/apps", "apps"),
            ("/audit", "audit"),
            ("/health", "health"),
            ("/no-such-page", "not-found"),
        ):
            tour.open(path)
            tour.check(name)
        tour.open("/confirmations")
        first = browser.find_element(By.CSS_SELECTOR, ".ttl").text
        # The page's script counts the time down every second, in the page's words.
        WebDriverWait(browser, WAIT_S).until(lambda b: b.find_element(By.CSS_SELECTOR, ".ttl").text != first)
        counted = browser.find_element(By.CSS_SELECTOR, ".ttl").text
        assert SCRIPTS[language].search(counted) and "left" not in counted, counted
        tour.open(f"/records/{accepted[0]}")
        Select(browser.find_element(By.ID, "m-operation")).select_by_value("dispute")
        browser.find_element(By.CSS_SELECTOR, "form.filters button[type=submit]").click()
        WebDriverWait(browser, WAIT_S).until(lambda b: "confirmed" in b.page_source)
        tour.check("record-confirm")
        tour.open("/bindings")
        browser.find_element(By.CSS_SELECTOR, "form[action='/bindings/revoke'] button").click()
        WebDriverWait(browser, WAIT_S).until(lambda b: "confirmed" in b.page_source)
        tour.check("binding-confirm")
        tour.open("/health")
        browser.find_element(By.CSS_SELECTOR, "form[action='/health/verify'] button").click()
        WebDriverWait(browser, WAIT_S).until(lambda b: b.find_elements(By.CSS_SELECTOR, "p.notice"))
        tour.check("health-verified")
