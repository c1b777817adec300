"""Drive Debian's headless Chromium over the DevTools protocol, and serve the dashboard for it.

The protocol runs over `--remote-debugging-pipe` (fd 3 in, fd 4 out, NUL-terminated JSON): no
websocket client, no port to race for, and the browser dies with its pipes. Only what the tests
need: navigate, read the page's text, click a link, take a screenshot.

Run as a script it serves a warehouse and refreshes the screenshots under docs/screenshots:

    .venv/bin/python -m tests.dashboard.browser docs/screenshots
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from analyzers.reports.pdf import HEADLESS_FLAGS

ROW_PX = 35  # a data grid's row (dashboard.tables.ROW_PX)
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
APP = Path(__file__).parents[2] / "dashboard" / "app.py"
FLAGS = (*HEADLESS_FLAGS, "--hide-scrollbars", "--remote-debugging-pipe")


# Elements still to draw: Streamlit's loading skeletons, and Vega charts without their canvas.
UNDRAWN_JS = """
document.querySelectorAll('[data-testid="stSkeleton"]').length
+ Array.from(document.querySelectorAll('[data-testid="stVegaLiteChart"]'))
    .filter((chart) => !chart.querySelector('canvas, svg')).length
"""
# Resolves after the next two frames are painted (or after a second, where a headless page
# draws no frames).
NEXT_FRAMES_JS = """
new Promise((done) => {
  requestAnimationFrame(() => requestAnimationFrame(() => done(true)));
  setTimeout(() => done(false), 1000);
})
"""


class BrowserError(RuntimeError):
    pass


class Browser:
    """One Chromium process with one page attached (flat session)."""

    def __init__(self, width: int = 1400, height: int = 1800) -> None:
        self._profile = tempfile.TemporaryDirectory(prefix="fleetscope-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def child_fds() -> None:
            # Chromium expects the pipe on fds 3 and 4. dup first: a pipe end may already be fd 3
            # or 4, and dup2 onto itself would keep its close-on-exec flag.
            read_end, write_end = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self._process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={self._profile.name}",
             f"--window-size={width},{height}", "about:blank"],
            close_fds=False,  # only inheritable fds survive exec: 0-2 and the dup2'd 3 and 4
            preexec_fn=child_fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call("Page.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer (events in between are dropped)."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                result: dict[str, Any] = reply.get("result", {})
                return result

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise BrowserError("chromium closed its DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        parsed: dict[str, Any] = json.loads(raw)
        return parsed

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", session=True, url=url)

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", session=True, expression=expression, returnByValue=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def text(self) -> str:
        return str(self.evaluate("document.body ? document.body.innerText : ''"))

    def wait_for_text(self, *needles: str, timeout_s: float = 60.0) -> str:
        """Poll the page until every needle is in its text and no element is still running."""
        deadline = time.monotonic() + timeout_s
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            running = self.evaluate("!!document.querySelector('[data-testid=\"stStatusWidget\"]')")
            if all(n in text for n in needles) and not running:
                return text
            time.sleep(0.25)
        missing = [n for n in needles if n not in text]
        raise BrowserError(f"page never showed {missing}; it shows:\n{text[:3000]}")

    def click_link(self, href_part: str) -> None:
        found = self.evaluate(
            f"(() => {{ const a = document.querySelector('a[href*={json.dumps(href_part)}]');"
            " if (!a) return false; a.click(); return true; })()"
        )
        if not found:
            raise BrowserError(f"no link with {href_part!r} in its href")

    def click_row(self, table: int, row: int, timeout_s: float = 60.0) -> None:
        """Click row `row` (0: the first under the header) of the page's `table`-th data grid, on
        its selection box: a listing's row opens what it lists (dashboard.tables.listing)."""
        find = (
            "(() => { const grids = document.querySelectorAll('[data-testid=\"stDataFrame\"]');"
            f" const grid = grids[{table} < 0 ? grids.length + {table} : {table}];"
            # The grid's accessible table holds a row once the data grid has it to paint.
            f" if (!grid || !grid.querySelector('tr[aria-rowindex=\"{row + 2}\"]')) return null;"
            " grid.scrollIntoView({block: 'center'});"
            " const r = grid.getBoundingClientRect(); return [r.left, r.top]; })()"
        )
        deadline = time.monotonic() + timeout_s
        while (box := self.evaluate(find)) is None:  # grids draw after the page's text
            if time.monotonic() > deadline:
                raise BrowserError(f"no row {row} in data grid number {table} on the page")
            time.sleep(0.25)
        self.next_frames()  # its canvas paints that row then (it was a fixed 0.5 s sleep)
        x, y = box[0] + 16, box[1] + ROW_PX * (row + 1) + ROW_PX / 2
        for kind in ("mousePressed", "mouseReleased"):
            self.call(
                "Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y,
                button="left", clickCount=1,
            )  # fmt: skip

    def next_frames(self) -> None:
        """Until the page has drawn two more animation frames."""
        self.call(
            "Runtime.evaluate",
            session=True,
            expression=NEXT_FRAMES_JS,
            awaitPromise=True,
            returnByValue=True,
        )

    def screenshot(self, path: Path, timeout_s: float = 60.0) -> None:
        """A PNG of the page once it is drawn (`wait_drawn`), two animation frames later: Vega
        puts its canvas in the page before it paints into it. (It was a fixed second's sleep.)"""
        self.wait_drawn(timeout_s)
        self.next_frames()
        shot = self.call("Page.captureScreenshot", session=True, format="png")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def wait_drawn(self, timeout_s: float = 60.0) -> None:
        """Until no element is still a loading skeleton and every chart has its canvas (data
        grids and charts draw after the page's text)."""
        deadline = time.monotonic() + timeout_s
        while self.evaluate(UNDRAWN_JS):
            if time.monotonic() > deadline:
                raise BrowserError("the page never finished drawing")
            time.sleep(0.05)

    def close(self) -> None:
        with suppress(BrowserError):
            self.call("Browser.close")
        self._process.wait(timeout=30)
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._profile.cleanup()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Until the Streamlit server at `url` answers its health check ("ok"); BrowserError with
    the end of its stderr (where piped) when it exits or `timeout_s` passes first."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as answer:
                if answer.read() == b"ok":
                    return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                stderr = process.stderr.read().decode() if process.stderr else ""
                raise BrowserError(f"dashboard did not start: {stderr[-2000:]}") from None
            time.sleep(0.2)


@contextmanager
def dashboard_server(
    env: dict[str, str], timeout_s: float = 60.0, port: int | None = None
) -> Iterator[str]:
    """`fleetscope dashboard` on `port` (default: a free loopback port); yields its base URL."""
    port = port or free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "dashboard", "--port", str(port)],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, process, timeout_s)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()


def tour(url: str, shots: Path, trace_id: str = "stall-1/mi250") -> dict[str, str]:
    """Fleet -> idlest job (a click on its row) -> its trace (`trace_id`, a link), with a
    screenshot of each page and of the jobs, traces, hosts and sharing pages; returns each page's
    text."""
    browser = Browser()
    texts: dict[str, str] = {}
    try:
        browser.navigate(url + "/")
        texts["fleet"] = browser.wait_for_text("Idlest jobs", "GPU-h", "click a row to open")
        browser.screenshot(shots / "fleet.png")
        browser.click_row(-1, 0)  # the idlest job: the last table's first row
        texts["job"] = browser.wait_for_text("Job stall-1", "Findings", f"trace {trace_id}")
        browser.screenshot(shots / "job.png")
        browser.click_link("trace_id=" + urllib.parse.quote(trace_id, safe=""))
        texts["trace"] = browser.wait_for_text(f"Trace {trace_id}", "GPU busy span", "Top kernels")
        browser.screenshot(shots / "trace.png")
        browser.navigate(url + "/jobs")
        texts["jobs"] = browser.wait_for_text("Search job id", "3 of 3 jobs")
        browser.screenshot(shots / "jobs.png")
        browser.navigate(url + "/traces")
        texts["traces"] = browser.wait_for_text("Traces", "top finding", "click a row")
        browser.screenshot(shots / "traces.png")
        browser.navigate(url + "/hosts")
        texts["hosts"] = browser.wait_for_text("Nodes", "Needs attention", "hosts with XID errors")
        browser.screenshot(shots / "hosts.png")
        browser.navigate(url + "/sharing")
        texts["sharing"] = browser.wait_for_text("GPU sharing", "GPUs freed")
        browser.screenshot(shots / "sharing.png")
    finally:
        browser.close()
    return texts


if __name__ == "__main__":
    from tests.dashboard.conftest import build_warehouse, upload_trace

    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/screenshots")
    with tempfile.TemporaryDirectory() as tmp:
        built = build_warehouse(Path(tmp))
        # The docs show the trace as a user gets it: requested, uploaded and analysed once by the
        # server (the tests' fixture drops a file in the folder, which the page analyses itself).
        shutil.rmtree(built.data_dir / "traces" / "stall-1")
        uploaded = upload_trace(built)
        with dashboard_server(built.env) as base:
            tour(base, out, uploaded)
    print(f"screenshots in {out}")
