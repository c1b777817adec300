"""Time to finding per rule on a live server's data (issue 31: at most 2 minutes for R1 and R3).

    .venv/bin/python -m bench.time_to_finding --data-dir .demo/data

Under the default schedule (scheduler.interval_s 60 s, analyzers.lateness_s 120 s) run the demo
with `fleetscope demo --default-schedule` first (the demo's own schedule is 10 s).

For each rule, over the jobs it fired on: when its condition first held, when the finding was
first stored (the catalog's `findings.first_seen`), and the difference. When a condition first
held is known exactly only where the rule's threshold is a duration from the job's first sample:
R1 (zero utilization) holds `min_runtime_s` (300 s) after the job's first GPU sample, R3 (idle
allocation) `warn_idle_min` (60 min) after it for a job idle from the start; for a job already
running when the data began, after the warehouse's first sample of it
(`analyzers.rules.r01_zero_util`, `r03_idle_live`). Every other rule is printed from the job's
first sample (an upper bound on its lag). Reads the catalog and the warehouse; writes nothing.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
from datetime import UTC, datetime
from pathlib import Path

from fleetscope.settings import load_settings
from warehouse.read import reader

# Rules whose condition holds a fixed time after the job's first sample: that time, seconds.
HOLDS_AFTER_S = {"R1": 300.0, "R3": 3600.0}
TARGET_S = 120.0


def _utc(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def holds_after_s(thresholds_file: Path | None) -> dict[str, float]:
    """R1's and R3's durations, from the server's `analyzers.thresholds_file` when it had one."""
    from analyzers.base import load_threshold_overrides

    over = load_threshold_overrides(thresholds_file)
    r1 = float(over.get("zero_util", {}).get("min_runtime_s", HOLDS_AFTER_S["R1"]))
    r3 = over.get("idle_live", {}).get("warn_idle_min")
    return {"R1": r1, "R3": float(r3) * 60.0 if r3 is not None else HOLDS_AFTER_S["R3"]}


def measure(
    data_dir: Path, holds_s: dict[str, float] = HOLDS_AFTER_S
) -> list[tuple[str, int, float, float, str]]:
    """(rule, jobs, median lag s, max lag s, measured from) per rule."""
    settings = load_settings(env={"FLEETSCOPE_CORE_DATA_DIR": str(data_dir)})
    con = reader.connect(settings)
    first_seen = {
        str(job): moment.astimezone(UTC)
        for job, moment in con.execute(
            "SELECT job_id, min(ts) FROM gpu_samples WHERE job_id IS NOT NULL GROUP BY job_id"
        ).fetchall()
    }
    con.close()
    with sqlite3.connect(data_dir / "catalog.sqlite") as db:
        rows = db.execute(
            "SELECT rule_id, job_id, min(first_seen) FROM findings "
            "WHERE job_id IS NOT NULL GROUP BY rule_id, job_id"
        ).fetchall()
    lags: dict[str, list[float]] = {}
    for rule, job, stored in rows:
        started = first_seen.get(str(job))
        if started is None:
            continue
        holds = started.timestamp() + holds_s.get(str(rule), 0.0)
        lags.setdefault(str(rule), []).append(_utc(str(stored)).timestamp() - holds)
    return [
        (rule, len(v), statistics.median(v), max(v),
         "condition held" if rule in HOLDS_AFTER_S else "job's first sample")
        for rule, v in sorted(lags.items())
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="the server's core.data_dir")
    parser.add_argument(
        "--thresholds-file", default=None, help="the server's analyzers.thresholds_file, if any"
    )
    args = parser.parse_args()
    holds_s = holds_after_s(Path(args.thresholds_file) if args.thresholds_file else None)
    print(f"{'rule':<5} {'jobs':>5} {'median s':>9} {'max s':>8}  from")
    measured = measure(Path(args.data_dir), holds_s)
    for rule, jobs, median, worst, basis in measured:
        flag = " (over 2 min)" if rule in HOLDS_AFTER_S and worst > TARGET_S else ""
        print(f"{rule:<5} {jobs:>5} {median:9.0f} {worst:8.0f}  {basis}{flag}")
    fired = {row[0] for row in measured}
    for rule in HOLDS_AFTER_S:  # the two rules are always printed, fired or not
        if rule not in fired:
            print(
                f"{rule:<5} {0:>5} {'-':>9} {'-':>8}  no finding: its condition needs "
                f"{holds_s[rule]:.0f} s of a job's samples (a shorter R3 for a short run: "
                "--thresholds-file with [idle_live] warn_idle_min, as the server's)"
            )


if __name__ == "__main__":
    main()
