"""Registers `fleetscope quantiles` (see app.cli): percentiles answered from the sketch store.

    fleetscope quantiles gpu_util_pct --by cluster --window 7d --q 0.5,0.9,0.99 [--gpus all] [--json]

A GPU metric's percentiles count allocated GPUs only unless `--gpus all` (one definition with the
dashboard and reports: analyzers.quantiles.fleet_percentiles).

Reads only the sketches the analyzers keep (analyzers.quantiles.store, the server mode's), never the raw samples: a
fleet-wide p99 over a week is a merge of hourly sketches. Heavy imports stay inside the handler.
"""

from __future__ import annotations

import argparse
import json
import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    from fleetscope.settings import Settings

BY: dict[str, list[str]] = {
    "fleet": [],
    "cluster": ["cluster"],
    "team": ["team"],
    "job": ["job_id"],
    "host": ["host"],
}


def parse_quantiles(text: str) -> list[float]:
    """'0.5,0.9,0.99' -> [0.5, 0.9, 0.99]; anything outside [0, 1] is a ConfigError."""
    try:
        qs = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ConfigError(f"--q {text!r}: expected numbers in [0, 1], e.g. 0.5,0.9,0.99") from None
    if not qs or not all(0.0 <= q <= 1.0 for q in qs):
        raise ConfigError(f"--q {text!r}: expected numbers in [0, 1], e.g. 0.5,0.9,0.99")
    return qs


def _label(q: float) -> str:
    return f"p{q * 100:g}"


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


def cmd_quantiles(args: argparse.Namespace, settings: Settings) -> int:
    from analyzers.cli import parse_duration, parse_time
    from analyzers.quantiles.fleet_percentiles import percentiles, scope_note, scope_where
    from analyzers.quantiles.panes import METRICS
    from analyzers.quantiles.store import open_store
    from analyzers.run.clock import align_down
    from analyzers.sketch.core import DEFAULT_RELATIVE_ACCURACY

    scope_where(args.metric, args.gpus)  # an unknown metric is a clear error before any read
    qs = parse_quantiles(args.q)
    store = open_store(settings)  # the local folder, or the fleet's Iceberg table
    end = align_down(parse_time(args.end) if args.end else datetime.now(UTC), store.pane_s)
    start = end - parse_duration(args.window)
    conn = store.connect(start, end)
    try:
        sketches = percentiles(conn, args.metric, BY[args.by], start, end, args.gpus)
    finally:
        conn.close()
    rows: list[dict[str, Any]] = []
    for key, sketch in sorted(sketches.items(), key=lambda kv: tuple(str(k) for k in kv[0])):
        values = sketch.quantiles(qs).tolist()
        rows.append(
            {
                args.by: "/".join("-" if k is None else str(k) for k in key) or "fleet",
                "count": sketch.count,
                "mean": _number(sketch.sum / sketch.count) if sketch.count else None,
                **{_label(q): _number(v) for q, v in zip(qs, values, strict=True)},
                "max": _number(sketch.max),
            }
        )
    metric = METRICS[args.metric]
    if args.json:
        payload = {
            "metric": metric.name,
            "unit": metric.unit,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "by": args.by,
            "gpus": args.gpus,
            "relative_error": DEFAULT_RELATIVE_ACCURACY,
            "groups": rows,
        }
        print(json.dumps(payload, indent=2))
        return 0
    print(
        f"{metric.name} ({metric.unit}, {metric.help}) from {start:%Y-%m-%d %H:%M} to "
        f"{end:%Y-%m-%d %H:%M} UTC, by {args.by}; values within 1 %; "
        f"counts {scope_note(args.metric, args.gpus)}"
    )
    if not rows:
        print("no sketches in this window (the analyzers keep them: `fleetscope analyze`)")
        return 0
    columns = list(rows[0])
    table = [[_cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in table)) for i, c in enumerate(columns)]
    print(
        "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(columns, widths, strict=True))
        )
    )
    for r in table:
        print(
            "  ".join(
                v.ljust(w) if i == 0 else v.rjust(w)
                for i, (v, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return 0


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "quantiles", help="Percentiles of a metric by cluster, team, job or host, from sketches."
    )
    p.add_argument("metric", help="a sketched metric, e.g. gpu_util_pct, step_time_s, cpu_pct")
    p.add_argument("--by", choices=list(BY), default="fleet", help="group by (default: fleet)")
    p.add_argument("--window", default="7d", help="how far back (e.g. 7d, 24h)")
    p.add_argument("--end", help="window end (ISO 8601; default: now)")
    p.add_argument("--q", default="0.5,0.9,0.99", help="comma-separated quantiles in [0, 1]")
    p.add_argument(
        "--gpus",
        choices=["allocated", "all"],
        default="allocated",
        help="GPU metrics: count only GPUs a job holds (default, as the dashboard) or all",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_quantiles)
