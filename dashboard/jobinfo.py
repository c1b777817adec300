"""What ClusterCockpit's job view shows at the top: start, end, duration, state, hosts, GPUs,
owner, and the job's CPU and host-memory footprint, as (field, value) rows a page lays out.

Times come from the job's samples (GPU samples, else the step metrics of a CPU-only job such as the
demo's PyTorch process) and the catalog (a scheduler's end time says it ended). Read-only.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import pandas as pd

from analyzers.plain import number, utc_time
from analyzers.run.window import Window
from dashboard.dcgm import Footprint

if TYPE_CHECKING:
    import duckdb

RUNNING_SLACK = timedelta(minutes=2)  # samples this fresh (to the warehouse's newest) mean running


def step_span(con: duckdb.DuckDBPyConnection, job_id: str) -> tuple[Window, list[str]] | None:
    """The window and hosts of a job's step metrics (a job with no GPU samples)."""
    row = con.sql(
        "SELECT min(ts), max(ts), list(DISTINCT host ORDER BY host) FROM step_samples "
        "WHERE job_id = $job",
        params={"job": job_id},
    ).fetchall()[0]
    if row[0] is None:
        return None
    start, end = row[0], row[1] + timedelta(milliseconds=1)
    return Window(start, end), [str(h) for h in row[2]]


def duration_text(length: timedelta) -> str:
    seconds = int(length.total_seconds())
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {seconds:02d} s"


def state_of(catalog_row: dict[str, Any], last: datetime, newest: datetime | None) -> str:
    end = catalog_row.get("end_ts")
    if end is not None and not pd.isna(end):
        return "ended"
    if newest is not None and newest - last <= RUNNING_SLACK:
        return "running"
    return "no recent samples"


def about(
    span: Window,
    hosts: list[str],
    gpus: int,
    catalog_row: dict[str, Any],
    newest: datetime | None,
    footprint: Footprint | None,
) -> list[tuple[str, str]]:
    rows = [
        ("state", state_of(catalog_row, span.end, newest)),
        ("start", utc_time(span.start)),
        ("end", "still running" if state_of(catalog_row, span.end, newest) == "running"
         else utc_time(span.end)),
        ("duration", duration_text(span.end - span.start)),
        ("hosts", ", ".join(hosts) or "n/a"),
        ("GPUs", str(gpus) if gpus else "none (a CPU-only process)"),
    ]  # fmt: skip
    for field in ("user", "team", "name", "model", "scheduler"):
        value = catalog_row.get(field)
        if value is not None and not pd.isna(value) and str(value):
            rows.append((field, str(value)))
    if footprint is None:
        rows.append(("CPU and host memory", "no host samples for these hosts"))
    else:
        cpu = (
            "n/a"
            if footprint.cpu_mean_pct is None
            else f"mean {number(footprint.cpu_mean_pct)} %, max {number(footprint.cpu_max_pct or 0)} %"
        )
        rows.append((f"CPU ({footprint.source})", cpu))
        if footprint.mem_max_gib is not None:
            total = f" of {number(footprint.mem_total_gib)} GiB" if footprint.mem_total_gib else ""
            rows.append(
                (
                    f"host memory peak ({footprint.source})",
                    f"{number(footprint.mem_max_gib)} GiB{total}",
                )
            )
    return rows
