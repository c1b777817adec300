"""First meaningful paint of each dashboard page in headless Chromium (issue 31: 1 s on the demo,
2 s on 7 days x 1,000 GPUs).

    .venv/bin/python -m bench.dashboard_paint                      # the tests' small fleet
    .venv/bin/python -m bench.dashboard_paint --demo 240           # a fresh `fleetscope demo`,
                                                                   # stopped after 240 s, served
    .venv/bin/python -m bench.dashboard_paint --demo-dir DIR       # a folder `fleetscope demo
                                                                   # --dir DIR` wrote
    .venv/bin/python -m bench.dashboard_paint --data-dir DIR       # any warehouse (core.data_dir)
    .venv/bin/python -m bench.dashboard_paint --week DIR           # bench.fresh_week's folder
                                                                   # (7 days x 1,000 GPUs)
    .venv/bin/python -m bench.dashboard_paint --peer-tree DIR      # the same pages served from
                                                                   # another checkout, same run
    .venv/bin/python -m bench.dashboard_paint --python-only ...    # no browser: each page's
                                                                   # Python, wall and CPU seconds

`fleetscope dashboard` is served on the warehouse and Debian's Chromium (tests/dashboard/browser.py)
opens each page. Three moments are timed from navigation: "headline", the page's title and its
first headline element (the tiles' row: Markdown since wave 8, an HTML block in wave 7; a metric,
chart, table or notice) drawn; "paint" (the figure the targets are about), the same and
Streamlit's running indicator gone, i.e. the page's script has finished and everything it draws
on open is sent; "settled", that and every element drawn (no skeleton left, every chart and grid
with its canvas). Each page is opened once cold (the server's caches empty for it), then
`--repeats` times; the median is printed with the cold open's times beside it: "cold headline"
(the title and headline tiles on that first open: on the first page, the first open after a
start, the page's first meaningful paint) and "cold" (its paint: the whole script finished). Peers, same run: a bare Streamlit page (a title and one metric: the
floor Streamlit and Chromium set on this machine); with `--peer-tree`, the same pages served from
another source tree (e.g. `git worktree add --detach /tmp/main main`, its C extensions copied in)
on the same warehouse, both servers up at once and each page opened from one and the other in
turn (a change of the machine's load falls on both). The 1-minute load average is printed before and after: on a shared machine
it decides most of the wall time.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from tests.dashboard.browser import Browser, dashboard_server, free_port, wait_healthy

PAGES = ["fleet", "jobs", "traces", "hosts", "gpus", "sharing"]
COLD_PEER_FIRST = [False]  # --peer-first: each page's cold open from the peer's server first
_CONTENT = (
    '\'.fs-tiles, [class*="st-key-fs_tiles"] h3, [data-testid="stMetric"],'
    ' [data-testid="stDataFrame"] canvas,'
    ' [data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg,'
    ' [data-testid="stAlert"], [data-testid="stTable"]\''
)
# 0: nothing yet; 1: title and headline in the document; 2: that, and the script has finished;
# 3: that, and every element drawn (no skeleton left, each chart and grid has its canvas)
_PAINTED_JS = f"""
(() => {{
  const main = document.querySelector('[data-testid="stMain"]') || document.body;
  if (!main) return 0;
  if (!(main.querySelector('h1') && main.querySelector({_CONTENT}))) return 0;
  if (document.querySelector('[data-testid="stStatusWidget"]')) return 1;
  const all = s => Array.from(main.querySelectorAll(s));
  const drawn = all('[data-testid="stVegaLiteChart"]').every(c => c.querySelector('canvas, svg'))
    && all('[data-testid="stDataFrame"]').every(g => g.querySelector('canvas'))
    && !main.querySelector('[data-testid="stSkeleton"]');
  return drawn ? 3 : 2;
}})()
"""


def paint_s(browser: Browser, url: str, timeout_s: float = 180.0) -> tuple[float, float, float]:
    """(headline s, paint s, settled s) of one page load from a blank page."""
    browser.navigate("about:blank")
    started = time.monotonic()
    browser.navigate(url)
    headline = paint = None
    while True:
        stage = browser.evaluate(_PAINTED_JS)
        now = time.monotonic() - started
        if stage and headline is None:
            headline = now
        if stage >= 2 and paint is None:
            paint = now
        if stage == 3:
            return headline or now, paint or now, now
        if now > timeout_s:
            raise TimeoutError(f"{url} never painted")
        time.sleep(0.02)


FLOOR_APP = """
import streamlit as st
st.title("floor")
st.metric("GPU-hours", "1.00")
"""

Row = dict[str, float]


def floor(browser: Browser, repeats: int) -> Row:
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
            # As dashboard_server waits before our pages' cold opens. Tried from the launch, the
            # try that painted had often begun while the server was still starting (2.1 s cold
            # against 1.1-1.3 s with the wait, seventeenth session, load 4).
            wait_healthy(url.rstrip("/"), server, timeout_s=120)
            cold = paint_s(browser, url)
            return _row(cold, [paint_s(browser, url) for _ in range(repeats)])
        finally:
            server.terminate()
            server.wait(timeout=30)


def _row(cold: tuple[float, float, float], warm: list[tuple[float, float, float]]) -> Row:
    return {
        "cold headline": cold[0],
        "cold": cold[1],
        "headline": statistics.median(h for h, _, _ in warm),
        "paint": statistics.median(p for _, p, _ in warm),
        "settled": statistics.median(s for _, _, s in warm),
    }


def pages(
    env: dict[str, str], repeats: int, peer_tree: Path | None
) -> tuple[dict[str, Row], dict[str, Row] | None]:
    """Paint every page served from this checkout and, with `peer_tree`, from that tree too (its
    folder is its server's working directory, so its packages come first on the path). Both
    servers run at once and each page is opened from one, then the other, in turn, so a change of
    the machine's load falls on both alike."""
    here = Path.cwd()
    trees = {"this": None, **({"peer": peer_tree.resolve()} if peer_tree else {})}
    urls: dict[str, str] = {}
    rows: dict[str, dict[str, Row]] = {label: {} for label in trees}
    with ExitStack() as stack:
        for label, tree in trees.items():
            os.chdir(tree or here)
            try:
                served = {**env, "PYTHONPATH": str(tree)} if tree else env
                urls[label] = stack.enter_context(dashboard_server(served, timeout_s=300))
            finally:
                os.chdir(here)
        browser = Browser(width=1440, height=1800)
        try:
            for page in PAGES:
                order = list(urls.items())[:: -1 if COLD_PEER_FIRST[0] else 1]
                cold = {label: paint_s(browser, f"{url}/{page}") for label, url in order}
                warm: dict[str, list[tuple[float, float, float]]] = {label: [] for label in urls}
                for _ in range(repeats):
                    for label, url in urls.items():
                        warm[label].append(paint_s(browser, f"{url}/{page}"))
                for label in urls:
                    rows[label][page] = _row(cold[label], warm[label])
                    print(f"  {label} {page}: {rows[label][page]}", flush=True)
        finally:
            browser.close()
    return rows["this"], rows.get("peer")


def table(floor_row: Row, this: dict[str, Row], peer: dict[str, Row] | None) -> None:
    """The per-page table, seconds; the floor's own row first."""
    figures = ("cold headline", "cold", "headline", "paint", "settled")
    peer_heads = "".join(f" peer {name} |" for name in figures) if peer else ""
    print(f"| page |{peer_heads} cold headline | cold | headline | paint | settled (medians) |")
    print("|---|" + "---:|" * (2 * len(figures) if peer else len(figures)))
    for page, row in [("bare Streamlit (floor)", floor_row), *this.items()]:
        before = peer.get(page) if peer else None
        peer_cells = (
            "".join(f" {before[name]:.2f} |" for name in figures)
            if before
            else (" - |" * len(figures) if peer else "")
        )
        print(f"| {page} |{peer_cells}" + "".join(f" {row[name]:.2f} |" for name in figures))


# A page's Python in a fresh process of the tree measured (AppTest, no browser): one run to fill
# the caches, then `repeats` reruns as a reader's refresh, `gap_s` apart (past
# dashboard.cache_ttl_s: a reader's next open after the short-lived caches ran out); CPU seconds
# (every thread of the process) are the figure a loaded machine disturbs least.
_PYTHON_ONLY = """
import json, statistics, sys, time, urllib.parse
from streamlit.testing.v1 import AppTest
page, repeats, gap_s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
app = AppTest.from_file("dashboard/app.py", default_timeout=600)
name, _, query = page.partition("?")
if name != "fleet":
    app.switch_page(f"views/{name}.py")
for pair in filter(None, query.split("&")):
    field, _, value = pair.partition("=")
    app.query_params[field] = urllib.parse.unquote(value)
began = time.perf_counter(); app.run(); cold = time.perf_counter() - began
walls, cpus = [], []
for _ in range(repeats):
    time.sleep(gap_s)
    began, cpu = time.perf_counter(), time.process_time()
    app.run()
    walls.append(time.perf_counter() - began); cpus.append(time.process_time() - cpu)
assert not app.exception, app.exception
print(json.dumps([cold, statistics.median(walls), statistics.median(cpus)]))
"""


def python_only(
    env: dict[str, str], repeats: int, peer_tree: Path | None, gap_s: float = 0.0
) -> None:
    """Each page's Python cost, this checkout and `peer_tree`, page by page in turn; reruns
    `gap_s` apart."""
    trees = [("peer", peer_tree.resolve())] if peer_tree else []
    trees.append(("this", Path.cwd()))
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'tree':<7} {'page':<8} {'first s':>8} {'rerun s':>8} {'rerun CPU s':>12}")
    for page in PAGES:
        for label, tree in trees:
            done = subprocess.run(
                [sys.executable, "-c", _PYTHON_ONLY, page, str(repeats), str(gap_s)],
                cwd=tree, env={**os.environ, **env, "PYTHONPATH": str(tree)},
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            first, wall, cpu = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{label:<7} {page.split('?')[0]:<8} {first:8.2f} {wall:8.2f} {cpu:12.2f}",
                flush=True,
            )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


def run(env: dict[str, str], repeats: int, peer_tree: Path | None) -> None:
    os.environ.update(env)
    print(f"warehouse {env}")
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} UTC, load average {os.getloadavg()[0]:.1f}")
    browser = Browser(width=1440, height=1800)
    try:
        floor_row = floor(browser, repeats)
    finally:
        browser.close()
    print(f"  floor: {floor_row}", flush=True)
    this, peer = pages(env, repeats, peer_tree)
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} UTC, load average {os.getloadavg()[0]:.1f}")
    table(floor_row, this, peer)


DEMO_DASHBOARD = {"FLEETSCOPE_DASHBOARD_DEFAULT_WINDOW": "last hour"}  # as `fleetscope demo` sets


@contextmanager
def demo_folder(seconds: float) -> Iterator[Path]:
    """A fresh `fleetscope demo` run for `seconds` and stopped (its own ports), then its folder."""
    with tempfile.TemporaryDirectory(prefix="dashboard-paint-demo-") as tmp:
        env = {
            **os.environ,
            "FLEETSCOPE_CONFIG": os.devnull,
            "FLEETSCOPE_SERVER_PORT": str(free_port()),
            "FLEETSCOPE_DASHBOARD_PORT": str(free_port()),
            "FLEETSCOPE_SIMULATOR_BASE_PORT": "0",
        }
        env.pop("FLEETSCOPE_CORE_DATA_DIR", None)
        fleetscope = str(Path(sys.executable).with_name("fleetscope"))
        command = [fleetscope, "demo", "--dir", "demo", "--duration-s", str(seconds)]
        print(f"{' '.join(command)} in {tmp}", flush=True)
        subprocess.run(
            command, cwd=tmp, env=env, check=True, timeout=seconds + 900,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        yield Path(tmp) / "demo"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="warehouse to serve (default: the tests' small fleet)")
    parser.add_argument("--week", type=Path, help="a bench.fresh_week --data folder to serve")
    parser.add_argument("--demo", type=float, help="run `fleetscope demo` this long, then serve it")
    parser.add_argument("--demo-dir", type=Path, help="a folder `fleetscope demo --dir` wrote")
    parser.add_argument("--peer-tree", type=Path, help="another source tree to serve, same run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--peer-first", action="store_true", help="open each page cold from the peer first"
    )
    parser.add_argument(
        "--python-only", action="store_true", help="no browser: each page's Python (AppTest)"
    )
    parser.add_argument(
        "--gap-s",
        type=float,
        default=0.0,
        help="--python-only: seconds between reruns (11: past the default 10 s cache TTL)",
    )
    parser.add_argument(
        "--job",
        help="also the job page of this job (default: stall-1 of the tests' fleet, the "
        "demo's PyTorch job with --demo / --demo-dir)",
    )
    parser.add_argument("--pages", help="comma-separated pages to open (default: every page)")
    args = parser.parse_args()
    COLD_PEER_FIRST[0] = args.peer_first
    if args.pages:
        PAGES[:] = [page for page in PAGES if page in args.pages.split(",")]
    measure = functools.partial(python_only, gap_s=args.gap_s) if args.python_only else run
    job = args.job or (
        "demo/cpu-trainer"
        if args.demo or args.demo_dir
        else None
        if args.week or args.data_dir
        else "stall-1"
    )
    if job and (not args.pages or "job" in args.pages.split(",")):
        PAGES.insert(1, f"job?job_id={urllib.parse.quote(job, safe='')}")
    if args.week:
        week = args.week.resolve()
        env = {
            "FLEETSCOPE_CORE_DATA_DIR": str(week / "var"),
            "FLEETSCOPE_WAREHOUSE_SEGMENTS_DIR": str(week / "segments"),
            "FLEETSCOPE_ANALYZERS_SKETCHES_DIR": str(week / "sketches"),
        }
        measure(env, args.repeats, args.peer_tree)
        return
    if args.demo_dir or args.demo:
        with ExitStack() as stack:
            folder = args.demo_dir or stack.enter_context(demo_folder(args.demo))
            env = {
                "FLEETSCOPE_CORE_DATA_DIR": str(Path(folder).resolve() / "data"),
                **DEMO_DASHBOARD,
            }
            measure(env, args.repeats, args.peer_tree)
        return
    if args.data_dir:
        measure({"FLEETSCOPE_CORE_DATA_DIR": str(args.data_dir)}, args.repeats, args.peer_tree)
        return
    from tests.dashboard.conftest import build_warehouse

    with tempfile.TemporaryDirectory() as tmp:
        data_dir = build_warehouse(Path(tmp)).data_dir
        measure({"FLEETSCOPE_CORE_DATA_DIR": str(data_dir)}, args.repeats, args.peer_tree)


if __name__ == "__main__":
    main()
