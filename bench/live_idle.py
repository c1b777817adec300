"""R1 and R3 time to finding under the default settings, R3 at its default 60 minutes (issue 31).

    .venv/bin/python -m bench.live_idle [--dir /tmp/live-idle] [--backfill-min 58] [--across-midnight]

R3 (idle allocation) holds once a GPU has been at 0 % for `warn_idle_min` (60 min by default), so a
run of minutes can only show it for a job that was already idle before the run. This bench starts
a real `fleetscope server` on its default schedule (scheduler.interval_s 60 s, analyzers.lateness_s
120 s, default thresholds: nothing of the server's configuration is changed) and plays an agent:

- job `idle-since-before` on host `b1`: its GPU's history from `--backfill-min` minutes ago up to
  now, posted as the agent's spool replays after an outage (one batch per 5 minutes of samples,
  through the ingest API), then a live sample every `agent.interval_s`; its R3 condition first
  holds at its first sample + 60 min, a couple of minutes into the live part;
- job `idle-from-now` on host `b2`: live samples only; its R1 condition holds 300 s after its first.

Both GPUs report 0 % utilization throughout. The bench polls the catalog until both findings are
stored (or `--timeout-s`), then prints, per rule and job, when the condition first held, when the
finding was first stored (`findings.first_seen`) and the lag. R1 of the backfilled job is printed
too, marked: its condition held inside the history, before the server had any of it, so its lag
is the history's age, not the scheduler's.

`--across-midnight`: both conditions span midnight UTC, where one analysis bucket (a UTC day,
`analyzers.bucket_s`) ends and the next begins. A run cannot wait for the wall clock's midnight,
so every sample is stamped a fixed offset behind the wall clock such that the live part begins at
23:57 UTC: `idle-since-before` is idle from 23:10 (47 minutes of history; R3 holds at 00:10) and
`idle-from-now` from 23:57 (R1 holds at 00:02). The server sees an agent whose samples are the
offset old (nothing of its configuration changes); the lags are wall-clock seconds from the
sample that completes a condition being due to the finding being stored. Its windows end at the
lateness bound, as they would for any stream behind the clock: the data lie far inside them.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sqlite3
import sys
import time
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from app.supervise import Supervisor, http_ok, wait_until
from bench.time_to_finding import HOLDS_AFTER_S, TARGET_S
from fleetscope import contract
from fleetscope.settings import load_settings

TOKEN = "live-idle-bench"
BACKFILLED, LIVE = "idle-since-before", "idle-from-now"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sample(moment: datetime, host: str, job: str) -> dict[str, object]:
    """One DCGM sample of an allocated GPU doing nothing (0 % busy, memory held)."""
    return {
        "ts": moment,
        "cluster": "bench",
        "host": host,
        "gpu_index": 0,
        "gpu_uuid": f"GPU-{host}-0",
        "gpu_model": "NVIDIA A100-SXM4-80GB",
        "job_id": job,
        "attribution": "hpc_job",
        "gpu_util": 0.0,
        "sm_active": 0.0,
        "tensor_active": 0.0,
        "dram_active": 0.0,
        "fb_used_mib": 2048.0,
        "fb_free_mib": 79872.0,
        "power_w": 62.0,
        "temp_c": 33.0,
        "sm_clock_mhz": 1410.0,
        "mem_clock_mhz": 1593.0,
        "xid_last": 0.0,
        "ecc_dbe_total": 0.0,
        "pcie_replay_total": 0.0,
        "power_violation_us": 0.0,
        "thermal_violation_us": 0.0,
    }


def post(url: str, rows: list[dict[str, object]], host: str) -> None:
    table = pa.Table.from_pylist(rows, schema=contract.GPU_SAMPLES)
    request = urllib.request.Request(
        f"{url}/v1/batches/gpu_samples",
        data=contract.to_ipc(table),
        method="POST",
        headers={
            "Authorization": f"Bearer {TOKEN}",
            "Content-Type": contract.ARROW_STREAM_MEDIA_TYPE,
            contract.HEADER_SCHEMA_VERSION: str(contract.SCHEMA_VERSION),
            contract.HEADER_BATCH_ID: uuid.uuid4().hex,
            contract.HEADER_AGENT: host,
        },
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 202, answer.status


def first_seen(catalog: Path) -> dict[tuple[str, str], datetime]:
    """(rule, job) -> when its finding was first stored."""
    if not catalog.exists():
        return {}
    with sqlite3.connect(catalog) as db:
        try:
            rows = db.execute(
                "SELECT rule_id, job_id, min(first_seen) FROM findings "
                "WHERE job_id IS NOT NULL GROUP BY rule_id, job_id"
            ).fetchall()
        except sqlite3.OperationalError:  # the server has not created the table yet
            return {}
    out = {}
    for rule, job, stored in rows:
        moment = datetime.fromisoformat(str(stored))
        out[(str(rule), str(job))] = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=Path("/tmp/live-idle"))
    parser.add_argument("--backfill-min", type=float, default=None, help="58; 47 across midnight")
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument(
        "--across-midnight",
        action="store_true",
        help="stamp samples so that both conditions span midnight UTC (module docstring)",
    )
    args = parser.parse_args()
    backfill_min = args.backfill_min or (47.0 if args.across_midnight else 58.0)
    shutil.rmtree(args.dir, ignore_errors=True)
    args.dir.mkdir(parents=True)
    interval_s = load_settings().agent.interval_s
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = {
        "FLEETSCOPE_CORE_DATA_DIR": str(args.dir / "data"),
        "FLEETSCOPE_SERVER_TOKENS": TOKEN,
        "FLEETSCOPE_SERVER_PORT": str(port),
    }
    settings = load_settings(env=env)
    print(
        f"server on the defaults: scheduler.interval_s {settings.scheduler.interval_s:g} s, "
        f"analyzers.lateness_s {settings.analyzers.lateness_s:g} s, agent.interval_s "
        f"{interval_s:g} s; R1 after {HOLDS_AFTER_S['R1']:g} s, R3 after "
        f"{HOLDS_AFTER_S['R3']:g} s at 0 %",
        flush=True,
    )
    with Supervisor(log_dir=args.dir / "logs") as supervisor:
        supervisor.start(
            "server", [str(Path(sys.executable).with_name("fleetscope")), "server"], env
        )
        wait_until(http_ok(f"{url}/healthz"), 120, "ingest server", supervisor.check_alive)
        wall = datetime.now(UTC).replace(microsecond=0)
        shift = timedelta(0)  # how far the samples' timestamps are behind the wall clock
        if args.across_midnight:
            midnight = datetime.combine(wall.date(), datetime.min.time(), UTC)
            shift = wall - (midnight - timedelta(minutes=3))
        now = wall - shift
        history_start = now - timedelta(minutes=backfill_min)
        if shift:
            print(
                f"samples stamped {shift} behind the wall clock: the live part begins at "
                f"{now:%Y-%m-%d %H:%M:%S} UTC",
                flush=True,
            )
        moment, batch = history_start, []
        while moment < now:
            batch.append(_sample(moment, "b1", BACKFILLED))
            if len(batch) * interval_s >= 300:
                post(url, batch, "b1")
                batch = []
            moment += timedelta(seconds=interval_s)
        if batch:
            post(url, batch, "b1")
        print(f"history posted: {BACKFILLED} from {history_start:%H:%M:%S} UTC", flush=True)
        live_start: datetime | None = None
        wanted = {("R3", BACKFILLED), ("R1", LIVE)}
        deadline = time.monotonic() + args.timeout_s
        found: dict[tuple[str, str], datetime] = {}
        while time.monotonic() < deadline:
            tick = time.monotonic()
            at = datetime.now(UTC) - shift
            live_start = live_start or at
            post(url, [_sample(at, "b1", BACKFILLED)], "b1")
            post(url, [_sample(at, "b2", LIVE)], "b2")
            found = first_seen(args.dir / "data" / "catalog.sqlite")
            if wanted <= set(found):
                break
            supervisor.check_alive()
            time.sleep(max(0.0, interval_s - (time.monotonic() - tick)))
    firsts = {BACKFILLED: history_start, LIVE: live_start}
    print(
        "\n| rule | job | condition first held (UTC, sample time) | finding stored (UTC) | lag s |"
    )
    print("|---|---|---|---|---:|")
    for (rule, job), stored in sorted(found.items()):
        if rule not in HOLDS_AFTER_S or job not in firsts or firsts[job] is None:
            continue
        held = firsts[job] + timedelta(seconds=HOLDS_AFTER_S[rule])  # type: ignore[operator]
        lag = (stored - (held + shift)).total_seconds()
        note = ""
        if job == BACKFILLED and rule == "R1":
            note = " (held inside the history: not a live lag)"
        elif lag > TARGET_S:
            note = " (over 2 min)"
        print(f"| {rule} | {job} | {held:%H:%M:%S} | {stored:%H:%M:%S} | {lag:.0f}{note} |")
    for rule, job in sorted(wanted - set(found)):
        print(f"| {rule} | {job} | - | no finding within {args.timeout_s:.0f} s | - |")
    return 0 if wanted <= set(found) else 1


if __name__ == "__main__":
    raise SystemExit(main())
