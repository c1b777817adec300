"""First meaningful paint of each dashboard page in headless Chromium (issue 31: 1 s on the demo,
2 s on 7 days x 1,000 GPUs).

    .venv/bin/python -m bench.dashboard_paint                      # the tests' small fleet
    .venv/bin/python -m bench.dashboard_paint --data-dir DIR       # any warehouse (a demo's data,
                                                                   # bench.dashboard's var/bench/...)
    .venv/bin/python -m bench.dashboard_paint --week DIR           # bench.fresh_week's folder
                                                                   # (7 days x 1,000 GPUs)
    .venv/bin/python -m bench.dashboard_paint --peer-tree DIR      # the same pages served from
                                                                   # another checkout, same run
    .venv/bin/python -m bench.dashboard_paint --python-only ...    # no browser: each page's
                                                                   # Python, wall and CPU seconds

`fleetscope dashboard` is served on the warehouse and Debian's Chromium (tests/dashboard/browser.py)
opens each page; "first meaningful paint" is the time from navigation until the page's title, its
first headline element and its first chart or table are in the document and Streamlit's running
indicator is gone (what a person waits for before reading). Each page is opened once to warm the
server's caches (`dashboard.cache_ttl_s`), then `--repeats` times; the median is printed, with the
first (cold) time beside it. Peers, same run: the server-side render of the same page with
Streamlit's AppTest (no browser, no websocket), i.e. what the page costs in Python alone; a bare
Streamlit page (a title and one metric: the floor Streamlit and Chromium set on this machine);
and, with `--peer-tree`, the same pages served from another source tree (e.g. `git archive` of
the commit before a change), on the same warehouse in the same run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from streamlit.testing.v1 import AppTest

from tests.dashboard.browser import Browser, dashboard_server, free_port
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


FLOOR_APP = """
import streamlit as st
st.title("floor")
st.metric("GPU-hours", "1.00")
"""


def floor_s(browser: Browser, repeats: int) -> tuple[float, float]:
    """Cold and median paint of a bare Streamlit page: what no page of ours can go under."""
    with tempfile.TemporaryDirectory() as tmp:
        app = Path(tmp) / "floor.py"
        app.write_text(FLOOR_APP)
        port = free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", str(app), "--server.headless", "true",
             "--server.port", str(port), "--browser.gatherUsageStats", "false"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            url = f"http://127.0.0.1:{port}/"
            deadline = time.monotonic() + 120
            while True:
                try:
                    return paint_s(browser, url, timeout_s=5), statistics.median(
                        paint_s(browser, url) for _ in range(repeats)
                    )
                except TimeoutError:
                    if time.monotonic() > deadline:
                        raise
        finally:
            server.terminate()
            server.wait(timeout=30)


def pages(label: str, env: dict[str, str], repeats: int, tree: Path | None = None) -> None:
    """Paint every page served from `tree` (its folder is the server's working directory, so its
    packages come first on the path), or from this checkout."""
    here = Path.cwd()
    with ExitStack() as stack:
        os.chdir(tree or here)
        try:
            served = {**env, "PYTHONPATH": str(tree)} if tree else env
            url = stack.enter_context(dashboard_server(served, timeout_s=180))
        finally:
            os.chdir(here)
        browser = Browser(width=1440, height=1800)
        try:
            for page in PAGES:
                cold = paint_s(browser, f"{url}/{page}")
                warm = [paint_s(browser, f"{url}/{page}") for _ in range(repeats)]
                apptest = (
                    f"{statistics.median(apptest_s(page) for _ in range(repeats)):10.2f}"
                    if tree is None
                    else f"{'-':>10}"
                )
                print(
                    f"{label:<7} {page:<8} {cold:7.2f} {statistics.median(warm):9.2f} {apptest}",
                    flush=True,
                )
        finally:
            browser.close()


# A page's Python in a fresh process of the tree measured (AppTest, no browser): one run to fill
# the caches, then `repeats` reruns as a reader's refresh within dashboard.cache_ttl_s; CPU
# seconds (every thread of the process) are the figure a loaded machine disturbs least.
_PYTHON_ONLY = """
import json, statistics, sys, time
from streamlit.testing.v1 import AppTest
page, repeats = sys.argv[1], int(sys.argv[2])
app = AppTest.from_file("dashboard/app.py", default_timeout=600)
if page != "fleet":
    app.switch_page(f"views/{page}.py")
began = time.perf_counter(); app.run(); cold = time.perf_counter() - began
walls, cpus = [], []
for _ in range(repeats):
    began, cpu = time.perf_counter(), time.process_time()
    app.run()
    walls.append(time.perf_counter() - began); cpus.append(time.process_time() - cpu)
assert not app.exception, app.exception
print(json.dumps([cold, statistics.median(walls), statistics.median(cpus)]))
"""


def python_only(env: dict[str, str], repeats: int, peer_tree: Path | None) -> None:
    """Each page's Python cost, this checkout and `peer_tree`, page by page in turn."""
    import json

    trees = [("peer", peer_tree.resolve())] if peer_tree else []
    trees.append(("this", Path.cwd()))
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'tree':<7} {'page':<8} {'first s':>8} {'rerun s':>8} {'rerun CPU s':>12}")
    for page in PAGES:
        for label, tree in trees:
            done = subprocess.run(
                [sys.executable, "-c", _PYTHON_ONLY, page, str(repeats)],
                cwd=tree, env={**os.environ, **env, "PYTHONPATH": str(tree)},
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            first, wall, cpu = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"{label:<7} {page:<8} {first:8.2f} {wall:8.2f} {cpu:12.2f}", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


def run(env: dict[str, str], repeats: int, peer_tree: Path | None) -> None:
    os.environ.update(env)
    print(f"warehouse {env}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'tree':<7} {'page':<8} {'cold s':>7} {'median s':>9} {'AppTest s':>10}")
    browser = Browser(width=1440, height=1800)
    try:
        cold, warm = floor_s(browser, repeats)
    finally:
        browser.close()
    print(f"{'floor':<7} {'bare':<8} {cold:7.2f} {warm:9.2f} {'-':>10}", flush=True)
    if peer_tree is not None:
        pages("peer", env, repeats, peer_tree.resolve())
    pages("this", env, repeats)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="warehouse to serve (default: the tests' small fleet)")
    parser.add_argument("--week", type=Path, help="a bench.fresh_week --data folder to serve")
    parser.add_argument("--peer-tree", type=Path, help="another source tree to serve, same run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--python-only", action="store_true", help="no browser: each page's Python (AppTest)"
    )
    args = parser.parse_args()
    measure = python_only if args.python_only else run
    if args.week:
        week = args.week.resolve()
        env = {
            "FLEETSCOPE_CORE_DATA_DIR": str(week / "var"),
            "FLEETSCOPE_WAREHOUSE_SEGMENTS_DIR": str(week / "segments"),
            "FLEETSCOPE_ANALYZERS_SKETCHES_DIR": str(week / "sketches"),
        }
        measure(env, args.repeats, args.peer_tree)
        return
    if args.data_dir:
        measure({"FLEETSCOPE_CORE_DATA_DIR": str(args.data_dir)}, args.repeats, args.peer_tree)
        return
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = build_warehouse(Path(tmp)).data_dir
        measure({"FLEETSCOPE_CORE_DATA_DIR": str(data_dir)}, args.repeats, args.peer_tree)


if __name__ == "__main__":
    main()
