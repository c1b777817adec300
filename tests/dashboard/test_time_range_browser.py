"""Time ranges and auto-refresh as in Grafana (issue 31), in headless Chromium on the real server.

The sidebar offers the last 5 minutes to the last 28 days and a custom UTC range, and an
auto-refresh interval (off, 10 s, 30 s, 1 min, 5 min). Both live in the page's address
(`?range=1h&refresh=10s`, `?range=custom&from=...&to=...`), so a copied link opens the same view;
a page switched in the sidebar keeps them. The test warehouse (tests/dashboard/conftest.py) has
two hours from 2026-11-16 08:00 UTC, 8.00 allocated GPU-hours: its first hour holds 4.00
(train-ok 2, idle-1 1, stall-1 from 08:30 on 2 GPUs 1); its last 5 minutes 2 jobs (idle-1 ended
at 09:00).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest

from tests.dashboard.browser import CHROMIUM, Browser, BrowserError

pytestmark = [
    pytest.mark.slow,
    pytest.mark.real_component("chromium"),
    pytest.mark.skipif(shutil.which(CHROMIUM) is None, reason="chromium is not installed"),
]


def _query(browser: Browser) -> dict[str, str]:
    """The page's address query, once the page has written its view into it."""
    search = str(browser.evaluate("window.location.search"))
    pairs = (part.split("=", 1) for part in search.lstrip("?").split("&") if "=" in part)
    return {name: value.replace("%3A", ":") for name, value in pairs}


def _wait_query(browser: Browser, want: dict[str, str], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        query = _query(browser)
        if all(query.get(name) == value for name, value in want.items()):
            return
        if time.monotonic() > deadline:
            raise BrowserError(f"the address never held {want}: {query}")
        time.sleep(0.25)


_PICKED_JS = """
Object.fromEntries(Array.from(document.querySelectorAll('[data-testid="stSelectbox"] input'))
  .map(i => [i.getAttribute('aria-label'), i.value]))
"""


def _picked(browser: Browser, limit_s: float = 60.0) -> dict[str, str]:
    """The sidebar's pickers as shown: {"Time range": "last hour", "Auto-refresh": "off"}, once
    both are drawn (Streamlit may draw the page's text before the sidebar's widgets)."""
    deadline = time.monotonic() + limit_s
    while True:
        picked = dict(browser.evaluate(_PICKED_JS))
        if {"Time range", "Auto-refresh"} <= picked.keys() or time.monotonic() > deadline:
            return picked
        time.sleep(0.1)


def _refreshed_at(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith("refreshed ") and "UTC" in line:
            return line.split()[1]
    return None


@pytest.fixture
def browser() -> Iterator[Browser]:
    """Headless Chromium as wide as a desktop monitor, closed after the test."""
    browser = Browser(width=1440, height=1800)
    try:
        yield browser
    finally:
        browser.close()


def test_a_link_reproduces_the_range_and_the_refresh(
    warehouse_dashboard: str, browser: Browser
) -> None:
    url = warehouse_dashboard
    browser.navigate(f"{url}/fleet?range=custom&from=2026-11-16T08:00Z&to=2026-11-16T09:00Z")
    text = browser.wait_for_text("2026-11-16 08:00 to 09:00 UTC", "4.00 GPU-h")
    assert "buckets of 1 min" in text
    assert _picked(browser) == {"Time range": "custom range (UTC)", "Auto-refresh": "off"}
    _wait_query(browser, {"range": "custom", "from": "2026-11-16T08:00Z", "refresh": "off"})

    # the default range (7 days, hourly buckets), then the last hour from a link
    browser.navigate(f"{url}/fleet")
    browser.wait_for_text("8.00 GPU-h", "buckets of 60 min")
    assert _picked(browser)["Time range"] == "last 7 days"
    _wait_query(browser, {"range": "7d", "refresh": "off"})
    browser.navigate(f"{url}/fleet?range=5m")
    browser.wait_for_text("buckets of 1 min", "2 jobs")
    assert _picked(browser)["Time range"] == "last 5 minutes"
    _wait_query(browser, {"range": "5m"})
    assert "from" not in _query(browser)

    # a page switched in the sidebar keeps the range, and writes it into its own link
    browser.click_link("/jobs")
    browser.wait_for_text("Search job id", "2 of 2 jobs")
    assert _picked(browser)["Time range"] == "last 5 minutes"
    _wait_query(browser, {"range": "5m", "refresh": "off"})


def test_auto_refresh_reruns_the_page_by_itself(warehouse_dashboard: str, browser: Browser) -> None:
    url = warehouse_dashboard
    browser.navigate(f"{url}/hosts?range=15m&refresh=10s")
    text = browser.wait_for_text("Nodes", "every 10 s")
    assert _picked(browser) == {"Time range": "last 15 minutes", "Auto-refresh": "10s"}
    _wait_query(browser, {"range": "15m", "refresh": "10s"})
    first = _refreshed_at(text)
    assert first is not None, text
    deadline = time.monotonic() + 180
    while (now := _refreshed_at(browser.text())) in (first, None):
        if time.monotonic() > deadline:
            raise AssertionError(f"the page was not redrawn after {first}")
        time.sleep(1.0)
    assert now is not None and now > first
