"""First meaningful paint of each dashboard page in headless Chromium (issue 31: 1 s on the demo,
2 s on 7 days x 1,000 GPUs).

    .venv/bin/python -m bench.dashboard_paint                      # the tests' small fleet
    .venv/bin/python -m bench.dashboard_paint --data-dir DIR       # any warehouse (a demo's data,
                                                                   # bench.dashboard's var/bench/...)

`fleetscope dashboard` is served on the warehouse and Debian's Chromium (tests/dashboard/browser.py)
opens each page; "first meaningful paint" is the time from navigation until the page's title, its
first headline element and its first chart or table are in the document and Streamlit's running
indicator is gone (what a person waits for before reading). Each page is opened once to warm the
server's caches (`dashboard.cache_ttl_s`), then `--repeats` times; the median is printed, with the
first (cold) time beside it. Peer, same run: the server-side render of the same page with
Streamlit's AppTest (no browser, no websocket), i.e. what the page costs in Python alone.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.dashboard.browser import Browser, dashboard_server
from tests.dashboard.conftest import build_warehouse

APP = str(Path(__file__).parents[1] / "dashboard" / "app.py")
PAGES = ("fleet", "jobs", "traces", "hosts", "gpus", "sharing")
_PAINTED_JS = """
(() => {
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  const main = document.querySelector('[data-testid="stMain"]') || document.body;
  if (!main) return false;
  const title = main.querySelector('h1');
  const content = main.querySelector('[data-testid="stMetric"], [data-testid="stDataFrame"] canvas,'
    + ' [data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg,'
    + ' [data-testid="stAlert"], [data-testid="stTable"]');
  return !!(title && content);
})()
"""


def paint_s(browser: Browser, url: str, timeout_s: float = 120.0) -> float:
    browser.navigate("about:blank")
    started = time.monotonic()
    browser.navigate(url)
    while not browser.evaluate(_PAINTED_JS):
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"{url} never painted")
        time.sleep(0.02)
    return time.monotonic() - started


def apptest_s(page: str) -> float:
    started = time.monotonic()
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    if page != "fleet":
        app.switch_page(f"views/{page}.py")
        app.run()
    return time.monotonic() - started


def run(data_dir: Path, repeats: int) -> None:
    env = {"FLEETSCOPE_CORE_DATA_DIR": str(data_dir)}
    os.environ.update(env)
    print(f"warehouse {data_dir}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'page':<8} {'cold s':>7} {'median s':>9} {'AppTest s':>10}")
    with dashboard_server(env) as url:
        browser = Browser(width=1440, height=1800)
        try:
            for page in PAGES:
                cold = paint_s(browser, f"{url}/{page}")
                warm = [paint_s(browser, f"{url}/{page}") for _ in range(repeats)]
                python = statistics.median(apptest_s(page) for _ in range(repeats))
                print(f"{page:<8} {cold:7.2f} {statistics.median(warm):9.2f} {python:10.2f}")
        finally:
            browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="warehouse to serve (default: the tests' small fleet)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.data_dir:
        run(Path(args.data_dir), args.repeats)
        return
    with tempfile.TemporaryDirectory() as tmp:
        run(build_warehouse(Path(tmp)).data_dir, args.repeats)


if __name__ == "__main__":
    main()
