"""The fleet page's sketch percentiles on a kept sketch store: seconds per read, this tree against
a peer tree, and whether both merge the same sketch (issue 31: a 7-day window of 1,000 GPUs).

    .venv/bin/python -m bench.sketch_reads --sketches DIR --end 2026-01-11T23:59:50.001+00:00
    .venv/bin/python -m bench.sketch_reads --sketches DIR --end ... --peer-tree /tmp/main-tree

Each tree reads in a fresh process of its own (`PYTHONPATH` the tree), the trees in turn
`--rounds` times: `analyzers.quantiles.fleet_percentiles.percentiles(conn, "active_pct", [],
start, end)`, the dashboard's fleet percentiles, over the window of `--days` ending at `--end`
(its start on the hour, as the page's). Printed per read: wall and CPU seconds, the sketch's
count, p50 / p90 / p99, and a digest of the whole sketch (bucket ids and counts, extremes):
equal digests are the same merge. This tree also compares, on the store's own rows, the rows its
time-bounded reads choose (`reading.read_spans`) with the per-key anti-join over every row of the
range (`reading.chosen_sql` without spans): rows found in one and not the other, per view.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

_CHILD = """
import hashlib, json, sys, time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from analyzers.quantiles.fleet_percentiles import percentiles
from analyzers.quantiles.tiers import attach

root, end_iso, days, compare = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4]
end = datetime.fromisoformat(end_iso)
start = datetime.fromtimestamp((end - timedelta(days=days)).timestamp() // 3600 * 3600, UTC)
began, cpu = time.perf_counter(), time.process_time()
conn = duckdb.connect(":memory:")
conn.execute("SET TimeZone = 'UTC'")
conn.execute("SET enable_progress_bar = false")
attach(conn, root)
sketch = percentiles(conn, "active_pct", [], start, end, "allocated")[()]
wall, cpu = time.perf_counter() - began, time.process_time() - cpu
ids, counts = sketch.buckets()
digest = hashlib.sha256(
    json.dumps([ids.tolist(), counts.tolist(), list(sketch.top), list(sketch.bottom)]).encode()
).hexdigest()[:16]
out = {
    "wall_s": wall, "cpu_s": cpu, "count": int(sketch.count), "digest": digest,
    "p50_p90_p99": [round(float(v), 6) for v in sketch.quantiles([0.5, 0.9, 0.99])],
}
if compare == "rows":
    from analyzers.quantiles.reading import chosen_sql, read_spans
    from analyzers.quantiles.store_rows import BUCKETS, PANES

    where = "metric = 'active_pct' AND (job_id IS NOT NULL)"
    spans = read_spans(conn, start, end, where)
    for view in (BUCKETS, PANES):
        every = chosen_sql(view, start, end, where)
        bounded = chosen_sql(view, start, end, where, spans)
        rows = conn.execute(f"SELECT count(*) FROM ({every})").fetchone()[0]
        apart = [
            conn.execute(
                f"SELECT count(*) FROM (SELECT * FROM ({a}) EXCEPT ALL SELECT * FROM ({b}))"
            ).fetchone()[0]
            for a, b in ((every, bounded), (bounded, every))
        ]
        out[view] = {"rows": rows, "only_every": apart[0], "only_bounded": apart[1]}
print(json.dumps(out))
"""


def read_once(
    tree: Path, sketches: Path, end: str, days: float, compare: bool
) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(sketches), end, str(days), "rows" if compare else "-"],
        cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    found: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sketches", type=Path, required=True, help="the sketch store's folder")
    parser.add_argument("--end", required=True, help="the window's end (ISO, with its zone)")
    parser.add_argument("--days", type=float, default=7.0)
    parser.add_argument("--peer-tree", type=Path, help="another source tree, read in turn")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = [("this", Path.cwd())]
    if args.peer_tree:
        trees.insert(0, ("peer", args.peer_tree.resolve()))
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.1f}")
    print(json.dumps(read_once(Path.cwd(), args.sketches.resolve(), args.end, args.days, True)))
    for _ in range(args.rounds):
        for label, tree in trees:
            found = read_once(tree, args.sketches.resolve(), args.end, args.days, False)
            print(
                f"{label:5s} {found['wall_s']:6.2f} s wall {found['cpu_s']:6.2f} s CPU "
                f"count {found['count']:,} p50/p90/p99 {found['p50_p90_p99']} "
                f"digest {found['digest']}",
                flush=True,
            )
    print(f"{time.strftime('%H:%M:%S', time.gmtime())} UTC, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
