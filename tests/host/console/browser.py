"""The real console process and Debian's Chromium, headless, driven by Selenium with the system chromedriver.

Nothing is downloaded: the browser and its driver are the Debian packages `make test` installs
(.ci/system-packages). Their absence fails the browser tests (it is never a skip), as a missing PostgreSQL
fails the store's tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver

from tests.support.processes import reap

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Screenshots of every page, kept after the run (CI keeps the folder as the tests' artefacts).
ARTEFACTS = Path(os.environ.get("ENGRAM_ARTEFACTS", Path(__file__).parents[3] / "test-artefacts")) / "console"
_LINK = re.compile(r"(http://127\.0\.0\.1:\d+/login\?token=\S+)")


@contextmanager
def console_process(home: Path, stderr: list[str] | None = None) -> Iterator[str]:
    """`engram-memory console --port 0` on the home; yields the one-time login link it printed. What the
    process wrote to stderr is appended to `stderr` once it has stopped."""
    process = subprocess.Popen(
        [sys.executable, "-m", "engram_memory", "console", "--home", str(home), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "ENGRAM_EMBEDDING_MODEL": "off"},
    )
    try:
        assert process.stdout is not None
        for _ in range(5):
            line = process.stdout.readline().decode()
            found = _LINK.search(line)
            if found:
                yield found.group(1)
                break
        else:
            raise AssertionError("the console printed no login link")
    finally:
        process.terminate()
        try:
            _, errors = process.communicate(timeout=10)
            if stderr is not None:
                stderr.append(errors.decode(errors="replace"))
        finally:
            reap(process)


@contextmanager
def chromium() -> Iterator[WebDriver]:
    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), (
        "install Debian's chromium and chromium-driver (make test does: .ci/system-packages)"
    )
    options = Options()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: WebDriver, name: str) -> Path:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    target = ARTEFACTS / f"{name}.png"
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1280, max(600, min(height + 160, 3000)))
    driver.save_screenshot(str(target))
    driver.set_window_size(1280, 1000)
    return target
