"""`fleetscope demo` as a newcomer meets it (issue 15), on one demo run shared by every check.

The demo's real processes (simulator, agents, server, Streamlit, a real PyTorch training process
with the SDK) run on free loopback ports, started from a scratch folder as `make demo` would be.
Then, like a person with only the README:
- the demo prints the dashboard URL, the token and the lines that point a CLI at it;
- the CLI, run in the same folder, finds the running demo by itself and answers from its data,
  with findings within 60 s of the URL;
- `fleetscope profile --job demo/cpu-trainer` captures and analyses a real trace end to end;
- `fleetscope report weekly` with no arguments reports the week that has data;
- headless Chromium opens every page and finds no pop-up, no clipped table, no "None", no raw JSON,
  and findings where findings belong; a screenshot of each page is kept under test-artifacts/;
- the demo's real V100 trace (issue 31) is listed with its GPU work, and its kernel and what-if
  views show;
- the Job page's headline numbers are `fleetscope job --json`'s;
- a GPU allocated at 0 % (a host of the test's, shipping through the demo's ingest from the start)
  shows its R1 finding on its Job page at most 2 minutes after R1's condition first held (issue
  31), with the demo's settings as `make demo` has them but one: R1's runtime threshold is 60 s
  instead of jobstats' 300 s (`analyzers.thresholds_file`, the operator's own override path). The
  lag from the condition holding to the page is what this checks, and 300 s of waiting were a
  quarter of the suite's wall time; tests/analyzers hold R1 to its 300 s.
SIGINT then stops the demo, and no process that carries the demo's folder in its environment may
survive it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from app.supervise import free_port
from fleetscope.settings import load_settings
from simulator.maker.batches import gpu_batch
from simulator.wire import post_batch
from tests.dashboard.browser import Browser, BrowserError
from warehouse.read import reader

pytestmark = [
    pytest.mark.slow,
    pytest.mark.real_component("chromium"),
    pytest.mark.real_component("torch"),
]
pytest.importorskip("torch", reason="the demo's training process is real PyTorch")

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "demo-pages"
TORCH_JOB = "demo/cpu-trainer"
CUDA_JOB = "demo-resnet50"  # the real V100 trace the demo uploads (app/demo_trace.py)
FINDINGS_WITHIN_S = 60.0  # the promise: findings within a minute of the URL
ZERO_JOB = "e2e-zero-util"  # one GPU held at 0 % from the demo's start (ZeroUtilJob)
R1_HOLDS_AFTER_S = 60.0  # R1's condition: the job ran more than this (jobstats: 300 s; see above)
R1_WITHIN_S = 120.0  # issue 31: condition first holding -> finding on the page, at most 2 minutes
HEALTHY_AT_ZERO = ("xid_last", "ecc_dbe_total", "pcie_replay_total")  # R17's fault counters
# An idle A100's other readings, so its Hosts and GPUs rows read as a GPU does (the screenshots
# are the docs'): gpu_batch's random floats would show 625 °C and 635 W.
IDLE_READINGS = {
    "temp_c": 34.0, "power_w": 61.0, "sm_clock_mhz": 1410.0, "mem_clock_mhz": 1593.0,
    "fb_used_mib": 2048.0, "fb_free_mib": 79872.0, "pcie_tx_bytes_s": 0.0,
    "pcie_rx_bytes_s": 0.0, "nvlink_tx_bytes_s": 0.0, "nvlink_rx_bytes_s": 0.0,
    "power_violation_us": 0.0, "thermal_violation_us": 0.0,
}  # fmt: skip


def processes_mentioning(marker: str) -> list[int]:
    """PIDs whose environment names `marker` (the demo gives every child its data folder)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if marker.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def warehouse_counts(data_dir: Path) -> str:
    settings = load_settings(env={"FLEETSCOPE_CORE_DATA_DIR": str(data_dir)})
    connection = reader.connect(settings)
    gpus, jobs = connection.execute(
        "SELECT count(DISTINCT (host, gpu_index)), count(DISTINCT job_id) FROM gpu_samples"
    ).fetchall()[0]
    connection.close()
    return f"{gpus} GPUs · {jobs} jobs"


@dataclass
class ZeroUtilJob:
    """One healthy GPU of a host of the test's own ("e2e-idle"), held by ZERO_JOB at 0 %, shipped
    through the demo's ingest every 10 s as an agent ships (real HTTP, the demo's token).

    Healthy: `gpu_batch` fills every float column with a seeded random value, fault counters
    included (XID 0.65, 0.63 ECC double-bit errors, 0.64 PCIe replays). Shipped as they are, those
    rows are a GPU with a hardware fault: R17 fires and, as the root cause, absorbs R1 (an idle
    GPU after a fault is its symptom; analyzers.rules.causes), so the page shows R17 and never
    R1. The withdrawn first version of this check shipped them so (bench/RESULTS.md)."""

    ingest_url: str
    token: str
    first_sample: datetime | None = None
    stop: threading.Event = field(default_factory=threading.Event)

    def batch(self, at_ms: int) -> pa.Table:
        rows = gpu_batch("e2e-idle", start_ms=at_ms, timestamps=1, gpus=1, job_id=ZERO_JOB)
        for name in rows.column_names:  # every utilization and activity column at 0
            if name.endswith(("_util", "_active")) and pa.types.is_floating(rows[name].type):
                index = rows.column_names.index(name)
                rows = rows.set_column(index, name, pa.array([0.0], rows[name].type))
        readings = dict.fromkeys(HEALTHY_AT_ZERO, 0.0) | IDLE_READINGS  # no XID, ECC, replay
        for name, value in readings.items():
            if name in rows.column_names:
                index = rows.column_names.index(name)
                rows = rows.set_column(index, name, pa.array([value], rows[name].type))
        return rows

    def run(self) -> None:
        while not self.stop.is_set():
            now_ms = int(time.time() * 1000) // 10_000 * 10_000
            answer = post_batch(self.ingest_url, "gpu_samples", self.batch(now_ms),
                                token=self.token, agent="e2e-idle")  # fmt: skip
            if answer.status == 202 and self.first_sample is None:
                self.first_sample = datetime.fromtimestamp(now_ms / 1000, UTC)
            self.stop.wait(10.0)


@dataclass
class Demo:
    folder: Path  # where the demo was started (the CLI runs here too)
    data_dir: Path
    url: str
    printed: str
    url_at: float  # time.monotonic() when the URL was printed
    env: dict[str, str]
    zero_util: ZeroUtilJob

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`fleetscope ARGS` as the newcomer types it, in the demo's folder, no settings given."""
        return subprocess.run(
            [str(Path(sys.executable).with_name("fleetscope")), *args],
            cwd=self.folder, env=self.env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def catalog(self, sql: str) -> list[tuple[object, ...]]:
        with sqlite3.connect(self.data_dir / "catalog.sqlite") as db:
            return db.execute(sql).fetchall()


def _wait(condition: object, timeout_s: float, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout_s:.0f} s")
        time.sleep(1.0)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Demo]:
    folder = tmp_path_factory.mktemp("newcomer")
    demo_dir = folder / "demo"
    env = {
        **os.environ,
        "FLEETSCOPE_CONFIG": os.devnull,
        "FLEETSCOPE_SERVER_PORT": str(free_port()),
        "FLEETSCOPE_DASHBOARD_PORT": str(free_port()),
        "FLEETSCOPE_SIMULATOR_BASE_PORT": "0",  # the kernel picks; the demo reads them back
        "FLEETSCOPE_ANALYZERS_THRESHOLDS_FILE": str(folder / "thresholds.toml"),
    }
    (folder / "thresholds.toml").write_text(f"[zero_util]\nmin_runtime_s = {R1_HOLDS_AFTER_S}\n")
    env.pop("FLEETSCOPE_CORE_DATA_DIR", None)  # the CLI must find the demo by itself
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("fleetscope")), "demo", "--hosts", "2",
         "--interval-s", "1", "--dir", str(demo_dir)],
        cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    assert process.stdout is not None
    printed = []
    for line in process.stdout:
        printed.append(line)
        if "press Ctrl-C" in line:
            break
    text = "".join(printed)
    found = re.search(r"dashboard at (\S+)", text)
    if not found:  # stopped here, not left to be collected in a later test's warnings
        process.kill()
        text += process.communicate(timeout=120)[0]
    assert found, f"the demo never printed its dashboard URL:\n{text}"
    announced = json.loads((folder / "var" / "demo.json").read_text())
    zero_util = ZeroUtilJob(announced["ingest_url"], announced["token"])
    shipper = threading.Thread(target=zero_util.run, name="zero-util-job", daemon=True)
    shipper.start()
    try:
        yield Demo(folder, demo_dir / "data", found[1], text, time.monotonic(), env, zero_util)
    finally:
        zero_util.stop.set()
        shipper.join(timeout=60)
        process.send_signal(signal.SIGINT)
        output = process.communicate(timeout=120)[0]
        assert process.returncode == 0, text + output
        assert "no process left running" in output
        assert processes_mentioning(str(demo_dir)) == []
        assert not (folder / "var" / "demo.json").exists()  # withdrawn on the way out


def test_the_demo_prints_the_url_the_token_and_how_to_point_a_cli_at_it(demo: Demo) -> None:
    token = re.search(r"token (\S+)", demo.printed)
    assert token and len(token[1]) >= 20  # generated, never a fixed demo token
    assert f"export FLEETSCOPE_CORE_DATA_DIR={demo.data_dir}" in demo.printed
    assert f"export FLEETSCOPE_AGENT_TOKEN={token[1]}" in demo.printed
    assert f"fleetscope profile --job {TORCH_JOB} --steps 5" in demo.printed
    announced = json.loads((demo.folder / "var" / "demo.json").read_text())
    assert announced["token"] == token[1] and announced["dashboard_url"] == demo.url


def test_the_cli_finds_the_demo_and_findings_come_within_a_minute(demo: Demo) -> None:
    def ranked() -> bool:
        answer = demo.cli("opportunities", "--window", "1h", "--json")
        return answer.returncode == 0 and bool(json.loads(answer.stdout)["by_rule"])

    _wait(ranked, FINDINGS_WITHIN_S - (time.monotonic() - demo.url_at), "a first finding")
    answer = demo.cli("opportunities", "--window", "1h")
    assert "reading the running demo (pid" in answer.stderr
    assert f"at {demo.data_dir}" in answer.stderr
    assert "Recoverable GPU-hours, last 1h" in answer.stdout


def test_profile_captures_and_analyses_the_real_pytorch_job(demo: Demo) -> None:
    done = demo.cli("profile", "--job", TORCH_JOB, "--steps", "5", "--timeout", "90")
    assert done.returncode == 0, done.stdout + done.stderr
    # The closed loop (issue 18, on in the demo) may have profiled the job first: the user's
    # request is then not number 1, but it is the user's, not an automatic one.
    asked = re.search(rf"^profile request (\d+) for job {TORCH_JOB}: done$", done.stdout, re.M)
    assert asked is not None, done.stdout
    automatic = demo.catalog("SELECT request_id FROM auto_profiles")
    assert (int(asked[1]),) not in automatic
    assert "rank 0: 5 steps" in done.stdout
    t8 = [line for line in done.stdout.splitlines() if line.strip().startswith("[T8 ")]
    assert len(t8) == 1 and "data-loader bound" in t8[0], done.stdout


def test_a_stall_finding_on_the_pytorch_job_profiles_it_by_itself(demo: Demo) -> None:
    """Issue 18 in the demo: the trainer's data wait is a P1 finding, and the closed loop turns it
    into a real profile of the real process, the trace's evidence stored with the chain."""
    chain = (
        "SELECT rule_id, trace_id FROM auto_profiles "
        f"WHERE job_id = '{TORCH_JOB}' AND reason = 'triggered' AND evidence IS NOT NULL"
    )
    _wait(lambda: bool(demo.catalog(chain)), 240, "an automatic profile of the PyTorch job")
    ((rule_id, trace_id),) = demo.catalog(chain)[:1]
    assert rule_id == "P1"
    traced = f"SELECT job_id FROM traces WHERE trace_id = '{trace_id}'"
    assert demo.catalog(traced) == [(TORCH_JOB,)]


def test_report_weekly_without_arguments_reports_the_week_with_data(demo: Demo) -> None:
    done = demo.cli("report", "weekly", "--no-pdf")
    assert done.returncode == 0, done.stderr
    week = re.search(r"fleet (\d{4}-W\d{2}): (\S+)", done.stdout)
    assert week, done.stdout
    html = Path(week[2]).read_text()
    assert "No jobs ran this week" not in html  # the week reported is the one with data
    if "holds no GPU samples" in done.stderr:  # a demo on a Monday+ has no complete week of data
        assert f"reporting {week[1]}" in done.stderr


def test_the_pytorch_job_has_kwh_money_and_measured_mfu_on_a_simulated_gpu(demo: Demo) -> None:
    """Issue 32: the CPU trainer is shown on host 0's last GPU (simulated); its own FLOP count
    (torch's counter, fp32) over the H100's fp32 peak is its measured MFU, and the weekly report
    lists it with its kWh and its money at the demo's example price."""

    def measured() -> bool:
        done = demo.cli("job", TORCH_JOB)
        return done.returncode == 0 and " measured (" in done.stdout

    _wait(measured, 180, "the PyTorch job's measured MFU")
    out = demo.cli("job", TORCH_JOB).stdout
    assert re.search(r"^energy: +\d+\.\d\d kWh", out, re.M), out
    assert re.search(r"^cost: +[\d,.]+ USD", out, re.M), out
    assert "67 TFLOPS (NVIDIA H100 80GB HBM3, fp32, dense)" in out, out
    report = demo.cli("report", "weekly", "--no-pdf")
    written = re.search(r"fleet \d{4}-W\d{2}: (\S+)", report.stdout)
    assert written, report.stdout
    markdown = Path(written[1]).with_suffix(".md").read_text()
    assert f"| {TORCH_JOB} | demo | NVIDIA H100 80GB HBM3 (fp32) |" in markdown, markdown
    # the CLI takes the demo's example prices from demo.json: money here as on the dashboard
    assert (
        "| job | team | GPU (dtype) | MFU (measured) | team median | kWh | cost (USD) |" in markdown
    )
    assert "Example prices set by fleetscope demo" in markdown


# Page checks a person would make, run in the page: every table fits (nothing scrolls sideways),
# and the visible text (the data grids' cells included) shows no "None" and no raw JSON.
_CLIPPED_JS = """
(() => {
  const out = [];
  document.querySelectorAll('[data-testid="stDataFrame"], [data-testid="stTable"]')
    .forEach((table, index) => {
      table.querySelectorAll('*').forEach((inner) => {
        const style = getComputedStyle(inner);
        if (!['auto', 'scroll'].includes(style.overflowX)) return;
        if (inner.scrollWidth > inner.clientWidth + 1)
          out.push(`${table.dataset.testid} #${index}: ${inner.scrollWidth} > ${inner.clientWidth}`);
      });
    });
  return out;
})()
"""
_TEXT_JS = """
document.body.innerText + '\\n' + Array.from(
  document.querySelectorAll('[data-testid="stDataFrame"] [role="gridcell"], '
    + '[data-testid="stDataFrame"] td, [data-testid="stDataFrame"] th')
).map((cell) => cell.textContent).join('\\n')
"""
RAW_JSON = re.compile(r'[{\[]\s*"[A-Za-z_]+"\s*:|"_meta"|_epoch_s')


# Streamlit's "Page not found" (a URL no page has) and any other modal over the page.
_POPUP_JS = """
Array.from(document.querySelectorAll('[role="dialog"], [data-testid="stDialog"]'))
  .map((dialog) => dialog.innerText.slice(0, 200))
"""


def _wait_for_cells(browser: Browser, *needles: str, timeout_s: float = 120) -> str:
    """Like Browser.wait_for_text, but the data grids' cells count as text: a table's rows are
    the page's links now (issue 31), so a job id may be nowhere else on the page."""
    text = browser.wait_for_text(timeout_s=timeout_s)
    deadline = time.monotonic() + timeout_s
    while not all(n in text for n in needles):
        assert time.monotonic() < deadline, f"never showed {needles}:\n{text[:3000]}"
        time.sleep(0.5)
        text = str(browser.evaluate(_TEXT_JS))
    return text


# Known clipped tables, by page: none (the Trace page's what-if table takes the page's width).
KNOWN_CLIPPED: dict[str, int] = {}


def _check_page(browser: Browser, name: str, *needles: str) -> str:
    text = _wait_for_cells(browser, *needles)
    browser.screenshot(ARTIFACTS / f"{name}.png")
    assert browser.evaluate(_POPUP_JS) == [], f"{name}: a pop-up covers the page"
    clipped = browser.evaluate(_CLIPPED_JS)
    assert len(clipped) <= KNOWN_CLIPPED.get(name, 0), f"{name}: a table is clipped: {clipped}"
    shown = str(browser.evaluate(_TEXT_JS))
    assert not re.search(r"\bNone\b", shown), f"{name} shows None:\n{shown[:3000]}"
    assert not RAW_JSON.search(shown), f"{name} shows raw JSON:\n{shown[:3000]}"
    return f"{text}\n{shown}"


def _same_as_fleetscope_job(demo: Demo, job_id: str, page: str) -> None:
    """The Job page's headline (GPUs, allocated GPU-h, active %) as `fleetscope job --json`."""
    answer = demo.cli("job", job_id, "--json")
    assert answer.returncode == 0, answer.stderr
    cli = json.loads(answer.stdout)
    # the demo keeps running: the page was read a moment before the CLI, so allow its growth
    shown = re.search(r"allocated GPU-h\s+([\d.]+)", page)
    assert shown, page[:2000]
    # and the page rounds (0.0172 GPU-h is shown as 0.02): half its last digit either way
    decimals = len(shown[1].partition(".")[2])
    half_digit = 0.5 * 10.0**-decimals
    grown = cli["allocated_gpu_hours"] - float(shown[1])
    assert -half_digit <= grown < 0.05 + 0.05 * float(shown[1]) + half_digit
    assert re.search(rf"GPUs\s+{len(cli['per_gpu'])}\b", page), page[:2000]


def test_every_page_reads_like_a_person_expects(demo: Demo) -> None:
    torch_traces = f"SELECT count(*) FROM traces WHERE job_id = '{TORCH_JOB}'"
    if not demo.catalog(torch_traces)[0][0]:  # run alone (-k): profile first
        profiled = demo.cli("profile", "--job", TORCH_JOB, "--steps", "5", "--timeout", "90")
        assert profiled.returncode == 0, profiled.stderr
    _wait(lambda: demo.catalog(torch_traces)[0][0] > 0, 60, "a profiled trace")
    _wait(
        lambda: (
            demo.catalog(f"SELECT count(*) FROM findings WHERE job_id != '{TORCH_JOB}'")[0][0] > 0
        ),
        120,
        "a finding on a simulated job",
    )
    (job_id,) = demo.catalog(
        f"SELECT job_id FROM findings WHERE job_id != '{TORCH_JOB}' "
        "ORDER BY wasted_gpu_hours DESC LIMIT 1"
    )[0]
    (trace_id,) = demo.catalog(f"SELECT trace_id FROM traces WHERE job_id = '{TORCH_JOB}' LIMIT 1")[
        0
    ]
    browser = Browser(width=1440)
    try:
        deadline = time.monotonic() + 60
        while True:  # live numbers: the page shows the GPU and job counts the warehouse holds
            browser.navigate(demo.url + "/")
            fleet = browser.wait_for_text("GPU-h", "Idlest jobs", timeout_s=60)
            expected = warehouse_counts(demo.data_dir)
            if expected in fleet or time.monotonic() > deadline:
                break
            time.sleep(2)  # a job started between the page's query and ours: look again
        assert expected in fleet
        assert "Allocated" in fleet
        _check_page(browser, "fleet", "Top findings", "GPU-h recoverable", "Idlest jobs")
        browser.navigate(demo.url + "/fleet")  # the fleet page by its own name: no pop-up
        _check_page(browser, "fleet-by-name", "Allocated", "Idlest jobs", "Words used here")
        browser.navigate(demo.url + "/jobs")
        _check_page(browser, "jobs", "Search job id", str(job_id))
        browser.navigate(f"{demo.url}/job?job_id={job_id}")
        job = _check_page(browser, "job", f"Job {job_id}", "Problem:", "Fix:", "duration")
        assert "raw evidence (JSON)" in job  # the JSON itself stays folded away
        _same_as_fleetscope_job(demo, str(job_id), job)
        browser.navigate(f"{demo.url}/job?job_id={TORCH_JOB}")
        # issue 32: its CPU process is shown on a simulated GPU, with kWh, money and MFU
        torch_page = _check_page(
            browser, "job-torch", f"Job {TORCH_JOB}", "simulated GPU", "MFU (measured)", "kWh"
        )
        assert "Example prices set by fleetscope demo" in torch_page
        browser.navigate(demo.url + "/traces")
        _check_page(browser, "traces", str(trace_id))
        browser.navigate(f"{demo.url}/trace?trace_id={trace_id}")
        trace = _check_page(
            browser, "trace", "Steps and data loader", "Data loader in the trace", "Fix:"
        )
        assert "rank 0: steps" in trace
        # the CPU-only process holds no GPU: its findings say so, never "0 GPU-h/week" (issue 31)
        assert "no GPU held: no GPU-hours to recover" in trace and "GPU busy %" not in trace
        (cuda_trace,) = demo.catalog(f"SELECT trace_id FROM traces WHERE job_id = '{CUDA_JOB}'")[0]
        browser.navigate(demo.url + "/traces")
        listed = _check_page(browser, "traces-cuda", str(cuda_trace), CUDA_JOB, "GPU busy")
        assert "no GPU kernels" in listed  # the CPU-only trace beside it says so
        browser.navigate(f"{demo.url}/trace?trace_id={cuda_trace}")
        _check_page(
            browser,
            "trace-cuda",
            "Top kernels",
            "What if",
            "GPU timeline",
            "Data loader in the trace",
        )
        browser.navigate(demo.url + "/hosts")
        _check_page(browser, "hosts", "Nodes", "Health of every host", "Counters are what")
        browser.navigate(demo.url + "/gpus")
        _check_page(browser, "gpus", "temperature (°C)", "power (W) against the board limit")
        browser.navigate(demo.url + "/sharing")
        _check_page(browser, "sharing", "GPU sharing", "GPUs freed")
    finally:
        browser.close()
    pages = ("fleet", "fleet-by-name", "jobs", "job", "job-torch", "traces", "trace",
             "traces-cuda", "trace-cuda", "hosts", "gpus", "sharing")  # fmt: skip
    for page in pages:
        assert (ARTIFACTS / f"{page}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def r1_holds_at(first_s: float, bucket_s: float) -> float:
    """When R1's condition first holds for a job whose first sample is at `first_s`, at the
    latest: R1_HOLDS_AFTER_S of its samples inside one analysis bucket (`analyzers.bucket_s`,
    UTC-aligned: a finding's identity window). R1 also judges a GPU begun shortly before the
    bucket with its earlier samples, so it may hold sooner; this bound is the later one."""
    boundary = (first_s + R1_HOLDS_AFTER_S) // bucket_s * bucket_s
    return max(first_s, boundary) + R1_HOLDS_AFTER_S


def test_a_gpu_allocated_at_zero_shows_r1_on_its_page_within_two_minutes(demo: Demo) -> None:
    """Issue 31: "a GPU allocated at 0 % had no finding at about 5 minutes of data"; R1 needs
    R1_HOLDS_AFTER_S of samples, and the finding must be on the page at most 2 minutes after
    that (R1_WITHIN_S)."""
    _wait(lambda: demo.zero_util.first_sample is not None, 120, "the zero-util job's first batch")
    first = demo.zero_util.first_sample
    assert first is not None
    settings = load_settings(env={"FLEETSCOPE_CORE_DATA_DIR": str(demo.data_dir)})
    holds_at = r1_holds_at(first.timestamp(), settings.analyzers.bucket_s)
    browser = Browser(width=1440)
    try:
        while True:
            browser.navigate(f"{demo.url}/job?job_id={ZERO_JOB}&range=1h")
            try:
                page = browser.wait_for_text(f"Job {ZERO_JOB}", "Findings", timeout_s=60)
            except BrowserError:
                page = ""  # the job's first samples are not readable yet
            if "R1 · Zero utilization" in page:
                shown_at = time.time()
                break
            assert time.time() < holds_at + 600, f"no R1 finding 10 minutes after:\n{page[:2000]}"
            time.sleep(2.0)
        browser.screenshot(ARTIFACTS / "job-zero-util.png")
    finally:
        browser.close()
    lag_s = shown_at - holds_at
    print(f"R1 time to finding on the page: {lag_s:.0f} s after its condition first held")
    assert lag_s <= R1_WITHIN_S, f"R1 shown {lag_s:.0f} s after its condition held"
