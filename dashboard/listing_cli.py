"""`fleetscope hosts`, `fleetscope gpus` and `fleetscope traces`: the Hosts, GPUs and Traces pages
on the command line, with the same headline numbers for the same window (`dashboard.headlines`).

The window is the pages': `--window` (7d, 24h, 1h, ...) ending just after the newest sample, or at
`--end`, its start rounded down to a whole bucket (`analyzers.accounting.usage.aligned`), so the
page's "last 7 days" and `--window 7d` are one window. Reads go through the pages' telemetry
source (`dashboard.source`), embedded or fleet. Nothing heavy is imported at module level.
"""

from __future__ import annotations

import argparse
import json
import math
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from analyzers.run.window import Window
    from dashboard.source import TelemetrySource
    from fleetscope.settings import Settings


def _window_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--window", default="7d", help="how far back (e.g. 7d, 24h, 1h; default 7d)")
    p.add_argument("--end", help="window end (ISO 8601; default: just after the newest sample)")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")


def register_hosts(subparsers: Any) -> None:
    p = subparsers.add_parser("hosts", help="Per host: GPU use, load, memory, jobs and health.")
    _window_options(p)
    p.set_defaults(handler=cmd_hosts)


def register_gpus(subparsers: Any) -> None:
    p = subparsers.add_parser("gpus", help="Per GPU: utilization, temperature, power, memory.")
    _window_options(p)
    p.add_argument(
        "--host",
        action="append",
        default=[],
        help="only this host (repeatable; default: every one)",
    )
    p.set_defaults(handler=cmd_gpus)


def register_traces(subparsers: Any) -> None:
    p = subparsers.add_parser("traces", help="Captured profiler traces, newest first.")
    p.add_argument("--job", help="only this job's traces")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    p.set_defaults(handler=cmd_traces)


def _window(args: argparse.Namespace, telemetry: TelemetrySource) -> Window:
    from analyzers.accounting.usage import aligned
    from analyzers.cli import parse_duration, parse_time
    from fleetscope.errors import NotFoundError

    # the arguments first: a bad --window is the user's to fix whatever the warehouse holds
    length = parse_duration(args.window)
    if args.end:
        end = parse_time(args.end)
    else:
        newest = telemetry.latest_sample()
        if newest is None:
            raise NotFoundError(telemetry.no_samples())
        end = newest + timedelta(milliseconds=1)
    return aligned(end, length)


def _records(frame: pd.DataFrame, columns: list[str]) -> list[dict[str, Any]]:
    """JSON-ready rows: times as ISO text, NaN as null."""
    import pandas as pd

    rows = []
    for record in frame[columns].to_dict("records"):
        row = {}
        for name, value in record.items():
            if isinstance(value, pd.Timestamp):
                value = None if pd.isna(value) else value.isoformat()
            elif isinstance(value, float) and not math.isfinite(value):
                value = None
            elif hasattr(value, "item"):  # numpy scalars
                value = value.item()
            row[str(name)] = value
        rows.append(row)
    return rows


def _print(
    args: argparse.Namespace,
    payload: dict[str, Any],
    tables: dict[str, tuple[pd.DataFrame, dict[str, str]]],
    window: Window | None,
) -> None:
    """`payload` (headline numbers) and `tables` (name -> frame, column -> title) as JSON or text."""
    if args.json:
        out = dict(payload)
        if window is not None:
            out = {"window": {"start": window.start.isoformat(), "end": window.end.isoformat()}}
            out |= payload
        for name, (frame, columns) in tables.items():
            out[name] = _records(frame, list(columns))
        print(json.dumps(out, indent=2))
        return
    if window is not None:
        print(f"window {window.start:%Y-%m-%d %H:%M} - {window.end:%Y-%m-%d %H:%M} UTC")
    print(
        "  ".join(f"{k.replace('_', ' ')}: {'-' if v is None else v}" for k, v in payload.items())
    )
    for name, (frame, columns) in tables.items():
        print(f"\n{name.replace('_', ' ')}")
        if frame.empty:
            print("  (none)")
            continue
        shown = frame[list(columns)].rename(columns=columns)
        print(shown.to_string(index=False, na_rep="-", float_format=lambda x: f"{x:,.1f}"))


NODE_COLUMNS = {
    "host": "host",
    "cluster": "cluster",
    "gpus": "GPUs",
    "allocated_gpus": "allocated now",
    "jobs_now": "jobs now",
    "active_pct": "GPU active %",
    "cpu_busy_pct": "CPU %",
    "load1": "load",
    "mem_used_pct": "host mem %",
}
HEALTH_COLUMNS = {
    "host": "host",
    "gpus_with_xid": "XID GPUs",
    "xid_code": "last XID",
    "ecc_dbe_new": "ECC DBE",
    "pcie_replays_new": "PCIe replays",
    "power_throttle_s": "power throttled s",
    "thermal_throttle_s": "thermal throttled s",
    "last_sample": "last sample",
}


def cmd_hosts(args: argparse.Namespace, settings: Settings) -> int:
    from analyzers.reports.catalog_frames import catalog_frame
    from dashboard import data, headlines, nodes, source

    telemetry = source.source_for(settings)
    win = _window(args, telemetry)
    con = telemetry.connect(telemetry.scope(win.start, win.end))
    try:
        buckets = data.gpu_buckets(
            con, win, settings.agent.interval_s, max_gap_s=settings.analyzers.max_gap_s
        )
        table = nodes.node_table(buckets, nodes.host_load(con, win))
        health = data.host_health(con, win)
    finally:
        con.close()
    health = data.with_agents(health, catalog_frame(telemetry.catalog_engine(), "hosts"))
    _print(
        args,
        headlines.hosts(health),
        {"nodes": (table, NODE_COLUMNS), "health": (health, HEALTH_COLUMNS)},
        win,
    )
    return 0


GPU_COLUMNS = {
    "gpu": "GPU",
    "util_pct": "util % (mean)",
    "temp_c": "max °C",
    "power_w": "power W (mean)",
    "fb_used_pct": "memory % (max)",
}


def cmd_gpus(args: argparse.Namespace, settings: Settings) -> int:
    from dashboard import dcgm, headlines, source
    from fleetscope.errors import NotFoundError

    telemetry = source.source_for(settings)
    win = _window(args, telemetry)
    con = telemetry.connect(telemetry.scope(win.start, win.end))
    try:
        known = dcgm.hosts_in(con, win)
        unknown = sorted(set(args.host) - set(known))
        if unknown:
            raise NotFoundError(
                f"no GPU samples from host(s) {', '.join(unknown)} in this window; "
                f"hosts seen: {', '.join(known) or 'none'}"
            )
        hosts = args.host or known
        summary = headlines.gpu_summary(dcgm.gpu_panels(con, win, hosts))
    finally:
        con.close()
    _print(args, headlines.gpus(summary, len(hosts)), {"gpu_rows": (summary, GPU_COLUMNS)}, win)
    return 0


TRACE_COLUMNS = {
    "trace_id": "trace",
    "job_id": "job",
    "captured_at": "captured (UTC)",
    "duration_ms": "duration ms",
    "gpu": "GPU",
    "top_finding": "top finding",
}


def cmd_traces(args: argparse.Namespace, settings: Settings) -> int:
    from analyzers.reports.catalog_frames import catalog_frame
    from dashboard import data, headlines, source, trace_list
    from warehouse.profiling.trace_backend import trace_storage, traces_dir

    engine = source.source_for(settings).catalog_engine()
    stored = catalog_frame(engine, "traces")
    listed = data.trace_list(stored, trace_storage(settings), traces_dir(settings))
    rows = trace_list.with_summaries(listed, stored)
    if args.job:
        rows = rows[rows["job_id"] == args.job]
    _print(args, headlines.traces(rows), {"trace_rows": (rows, TRACE_COLUMNS)}, None)
    return 0
