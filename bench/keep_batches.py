"""Sketch keeping (`QuantileStore.keep`) with several slices and host slices in one build
(`store_rows.built_slices`) against one build per slice and host slice: the branch's code with its
cap (`BATCH_VALUES`), the same code with cap 0, and main's code (`--main DIR`, a checkout with its
C extensions built), each in a fresh process on the same data in the same run, alternating.

    .venv/bin/python -m bench.keep_batches --main /tmp/main-tree [--repeats 2] [--work DIR]

Scenarios (simulated by `simulator.sim.FleetSimulator`, segments written once under --work):
  slices  test_slices' fleet: 5 hosts, 2 days sampled every 120 s, the two day windows kept with
          every tier kept forever, whole and in host slices of 8 GPUs (as test_slices does)
  dense   6 hosts, 8 hours sampled every 10 s (test_evaluation's size), one 8-hour window and the
          deployment's retentions, whole and in host slices of 16 GPUs

CPU seconds are the keep's own (process time: DuckDB's threads included), not the process's.
After the timed runs, each side's last stores are compared in DuckDB: files (table, day,
sequence, rows), marks, and rows (EXCEPT ALL both ways; pane rows also with value_sum left out,
and the largest relative difference of value_sum where it differs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ORIGIN = 1_767_571_200  # 2026-01-05T00:00:00Z
SIDES = ("main", "per slice", "batched")


def _segments(root: Path, hosts: int, hours: int, step_s: int, seed: int) -> Path:
    from simulator.fleet import FleetSpec
    from simulator.sim import FleetSimulator
    from warehouse.storage.segments import SegmentStore

    if not (root / "manifest.json").exists():
        sim = FleetSimulator(
            FleetSpec(hosts=hosts, seed=seed), origin_s=ORIGIN, horizon_s=hours * 3600
        )
        store = SegmentStore(root)
        chunks = sim.iter_tables(ORIGIN, ORIGIN + hours * 3600, step_s, chunk_s=6 * 3600)
        for seq, chunk in enumerate(chunks, start=1):
            store.publish(seq, {n: store.write(n, t, seq) for n, t in chunk.items()})
    return root


def child(scenario: str, work: Path, out: Path, cap: int | None) -> dict[str, Any]:
    """Keep the scenario's windows into stores under `out`; seconds and builds."""
    from analyzers.base import StaticJobCatalog
    from analyzers.quantiles import store_rows
    from analyzers.quantiles.tiers import QuantileStore
    from analyzers.run.schedule import backfill_windows
    from analyzers.run.slices import host_slices
    from analyzers.run.window import Window
    from warehouse.read.reader import open_segments

    if cap is not None:
        store_rows.BATCH_VALUES = cap
    builds = 0
    build = store_rows._tier_rows

    def counted(*args: Any) -> Any:
        nonlocal builds
        builds += 1
        return build(*args)

    store_rows._tier_rows = counted  # type: ignore[assignment]
    day = timedelta(days=1)
    start = datetime.fromtimestamp(ORIGIN, UTC)
    if scenario == "slices":
        seg = _segments(work / "seg-slices", 5, 48, 120, 11)
        windows = backfill_windows(start, start + 2 * day, 86400)
        retention, gpus = None, 8
    else:
        seg = _segments(work / "seg-dense", 6, 8, 10, 1838)
        windows = [Window(start, start + timedelta(hours=8))]
        retention, gpus = {10: 6 * 3600.0, 60: 86400.0, 3600: None}, 16
    cpu = wall = 0.0
    for sliced in (False, True):
        store = QuantileStore(out / ("sliced" if sliced else "whole"), retention_s=retention)
        for window in windows:
            conn = open_segments(seg)
            hosts = host_slices(conn, window, gpus) if sliced else ()
            c0, w0 = time.process_time(), time.perf_counter()
            store.keep(conn, window, StaticJobCatalog(), hosts=hosts)
            cpu += time.process_time() - c0
            wall += time.perf_counter() - w0
            conn.close()
    return {"cpu": cpu, "wall": wall, "builds": builds}


def compare(a: Path, b: Path) -> str:
    """Stores `a` and `b` (whole and sliced each): identical, or how their rows differ."""
    import duckdb

    from warehouse.storage.segments import read_manifest

    notes = []
    for part in ("whole", "sliced"):
        ma, mb = read_manifest(a / part), read_manifest(b / part)
        files_a = {t: [(s.path.rsplit("-", 1)[0], s.rows) for s in ma.live(t)] for t in ma.tables}
        files_b = {t: [(s.path.rsplit("-", 1)[0], s.rows) for s in mb.live(t)] for t in mb.tables}
        if files_a != files_b or dict(ma.marks) != dict(mb.marks):
            notes.append(f"{part}: files or marks differ")
            continue
        conn = duckdb.connect()
        for table in sorted(ma.tables):
            la = [str(a / part / s.path) for s in ma.live(table)]
            lb = [str(b / part / s.path) for s in mb.live(table)]
            if not la:
                continue
            qa, qb = f"SELECT * FROM read_parquet({la})", f"SELECT * FROM read_parquet({lb})"
            n = conn.execute(f"SELECT count(*) FROM ({qa})").fetchall()[0][0]
            x = conn.execute(f"SELECT count(*) FROM ({qa} EXCEPT ALL {qb})").fetchall()[0][0]
            y = conn.execute(f"SELECT count(*) FROM ({qb} EXCEPT ALL {qa})").fetchall()[0][0]
            if not x and not y:
                continue
            if not table.startswith("sketch_panes"):
                notes.append(f"{part} {table}: {x}/{y} of {n} rows differ")
                continue
            drop = "* EXCLUDE (value_sum)"
            rest = conn.execute(
                f"SELECT count(*) FROM (SELECT {drop} FROM ({qa}) EXCEPT ALL "
                f"SELECT {drop} FROM ({qb}))"
            ).fetchall()[0][0]
            keys = ("pane_start", "resolution_s", "metric", "cluster", "team", "job_id", "host")
            on = " AND ".join(f"p.{k} IS NOT DISTINCT FROM q.{k}" for k in (*keys, "gpu_index"))
            worst = conn.execute(
                f"SELECT max(abs(p.value_sum - q.value_sum) / greatest(abs(p.value_sum), 1e-300))"
                f" FROM ({qa}) p JOIN ({qb}) q ON {on}"
            ).fetchall()[0][0]
            notes.append(
                f"{part} {table}: value_sum of {x} of {n} rows differs (relative <= {worst:.1e}),"
                f" every other column {'equal' if not rest else f'DIFFERS in {rest} rows'}"
            )
    return "; ".join(notes) or "identical"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--main", type=Path, required=True, help="main's checkout, built")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/keep-batches"))
    parser.add_argument("--compare-only", action="store_true", help="compare the last stores")
    parser.add_argument(
        "--child", nargs=3, metavar=("SCENARIO", "OUT", "CAP"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        scenario, out, cap = args.child
        found = child(scenario, args.work, Path(out), None if cap == "-" else int(cap))
        print(json.dumps(found))
        return
    here = Path(__file__).resolve().parent.parent
    trees = {"main": args.main.resolve(), "per slice": here, "batched": here}
    caps = {"main": "-", "per slice": "0", "batched": "-"}
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for scenario in () if args.compare_only else ("slices", "dense"):
        for repeat in range(args.repeats):
            order = SIDES if repeat % 2 == 0 else SIDES[::-1]
            for side in order:
                out = args.work / "stores" / scenario / side.replace(" ", "-")
                subprocess.run(["rm", "-rf", str(out)], check=True)
                # -P: not bench/ first on the path (bench/analyzers.py would hide the package)
                env = {**os.environ, "PYTHONPATH": str(trees[side])}
                cmd = [
                    sys.executable,
                    "-P",
                    __file__,
                    "--work",
                    str(args.work),
                    "--main",
                    str(args.main),
                ]
                cmd += ["--child", scenario, str(out), caps[side]]
                load = os.getloadavg()[0]
                done = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
                found = json.loads(done.stdout.strip().splitlines()[-1])
                found["load"] = load
                results.setdefault((scenario, side), []).append(found)
                print(scenario, side, found, file=sys.stderr, flush=True)
    print("| scenario | side | builds | keep CPU s (each run) | keep wall s | load |")
    print("|---|---|---:|---|---|---|")
    for (scenario, side), runs in results.items():
        cpu = " / ".join(f"{r['cpu']:.1f}" for r in runs)
        wall = " / ".join(f"{r['wall']:.1f}" for r in runs)
        load = " / ".join(f"{r['load']:.1f}" for r in runs)
        print(f"| {scenario} | {side} | {runs[0]['builds']} | {cpu} | {wall} | {load} |")
    stores = args.work / "stores"
    for scenario in ("slices", "dense"):
        main_store = stores / scenario / "main"
        for side in ("per slice", "batched"):
            print(
                f"- {scenario}, {side} against main: "
                f"{compare(stores / scenario / side.replace(' ', '-'), main_store)}"
            )


if __name__ == "__main__":
    main()
