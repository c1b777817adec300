"""What the rules' look-back before a window costs (issue 31): one analyzer pass just after
midnight UTC, with and without the samples before it, same process, alternating.

    .venv/bin/python -m bench.live_lookback [--gpus 128] [--into-min 5] [--rounds 3]

Since issue 31 the analyzers' shared frame reads the longest `lookback_s` of the pipeline's
analyzers before its window (R3: 120 min) so that a condition spanning a bucket's start is seen.
The costliest window for it is a live one just after midnight: `--into-min` minutes of the day
and 2 hours of look-back. Data: `--gpus` GPUs (8 per host, one job per host, half of them idle)
sampled every 10 s from 2 h 10 min before midnight to `--into-min` after, in a DuckDB file.
Peer: the same pass on a copy holding only the window's rows (what the pass read before the
look-back: nothing before the window to read). Prints CPU seconds of `Pipeline.run` per round
(process time) and the findings each found.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import duckdb

from analyzers.base import StaticJobCatalog
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from simulator.maker.series import T0, Fleet

IDLE = {"gpu_util": 0.0, "gr_engine_active": 0.0, "sm_active": 0.0, "tensor_active": 0.0}
MIDNIGHT = T0 + timedelta(days=1)
BEFORE_MIN = 130.0


def write(path: Path, gpus: int, into_min: float, only_window: bool) -> None:
    fleet = Fleet()
    start_min = 24 * 60 - (0.0 if only_window else BEFORE_MIN)
    minutes = into_min + (0.0 if only_window else BEFORE_MIN)
    for host in range(gpus // 8):
        fields = IDLE if host % 2 else {}
        fleet.gpus(f"job-{host}", f"h{host:03d}", range(8), start_min, minutes, **fields)
    with duckdb.connect(str(path)) as conn:
        for name, table in fleet.tables().items():
            conn.register("_load", table)
            conn.execute(f"CREATE TABLE {name} AS SELECT * FROM _load")
            conn.unregister("_load")


def one_pass(path: Path, window: Window) -> tuple[float, list[str]]:
    conn = duckdb.connect(str(path), read_only=True)
    try:
        started = time.process_time()
        result = Pipeline.default().run(conn, window, StaticJobCatalog())
        cpu_s = time.process_time() - started
    finally:
        conn.close()
    assert not result.errors, result.errors
    return cpu_s, sorted(f"{f.rule_id}:{f.job_id}" for f in result.findings)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, default=128)
    parser.add_argument("--into-min", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    window = Window(MIDNIGHT, MIDNIGHT + timedelta(minutes=args.into_min))
    with tempfile.TemporaryDirectory(prefix="live-lookback-") as tmp:
        looked, peer = Path(tmp) / "with.duckdb", Path(tmp) / "window-only.duckdb"
        write(looked, args.gpus, args.into_min, only_window=False)
        write(peer, args.gpus, args.into_min, only_window=True)
        one_pass(looked, window)  # warm-up: imports, DuckDB's first plans
        runs: dict[str, list[float]] = {"look-back (this tree)": [], "window only (peer)": []}
        found: dict[str, list[str]] = {}
        for _ in range(args.rounds):
            for label, path in (("look-back (this tree)", looked), ("window only (peer)", peer)):
                cpu_s, found[label] = one_pass(path, window)
                runs[label].append(cpu_s)
    print(f"{args.gpus} GPUs, window {args.into_min:g} min into the day, look-back 120 min")
    print("| pass | CPU s per round | median | findings |")
    print("|---|---|---:|---|")
    for label, seconds in runs.items():
        median = sorted(seconds)[len(seconds) // 2]
        rounds = ", ".join(f"{s:.2f}" for s in seconds)
        rules = sorted({f.split(":")[0] for f in found[label]})
        print(f"| {label} | {rounds} | {median:.2f} | {len(found[label])} ({', '.join(rules)}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
