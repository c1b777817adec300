"""Recoverable kWh and money next to every finding's recoverable GPU-hours.

A finding's `wasted_gpu_hours` are hours of its job's GPUs; the energy they drew is estimated at
the job's own mean draw over the window (its kWh per allocated GPU-hour,
analyzers.accounting.energy), and their money at the job's GPU-hour price
(analyzers.accounting.cost: team, else cluster, else GPU model). The figures go into the
finding's evidence, so every view that shows a finding (CLI, dashboard, reports, e-mail: all
through analyzers.plain) and everything that sums findings shows them:

- `recoverable_kwh`: wasted GPU-hours x the job's kWh per GPU-hour (absent where the job has no
  energy reading);
- `recoverable_money` and `currency`: wasted GPU-hours x the job's price, only where a price is
  set (never a zero for "unknown").

A rule may set its own (the MFU rule prices its hours at the team median): what a finding
already carries is kept.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

import pandas as pd

from analyzers.accounting.cost import Prices
from analyzers.accounting.energy import job_energy

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.findings import Finding
    from analyzers.run.window import Window

KWH: Final = "recoverable_kwh"
MONEY: Final = "recoverable_money"
CURRENCY: Final = "currency"


@dataclasses.dataclass(frozen=True)
class JobDraw:
    """What a job's GPU-hours cost in energy, and which price applies to them."""

    kwh_per_gpu_h: float | None
    gpu_model: str | None
    cluster: str | None


def job_draws(
    con: duckdb.DuckDBPyConnection,
    window: Window,
    jobs: Sequence[str],
    default_interval_s: float,
    max_gap_s: float,
) -> dict[str, JobDraw]:
    """Each of `jobs`' kWh per allocated GPU-hour over the window, its GPU model and cluster."""
    frame = job_energy(con, window, default_interval_s, max_gap_s=max_gap_s, jobs=list(jobs))
    out: dict[str, JobDraw] = {}
    for row in frame.to_dict("records"):
        if pd.isna(row["job_id"]):
            continue
        gpu_h, kwh = float(row["gpu_h"]), float(row["energy_kwh"])
        rate = kwh / gpu_h if gpu_h > 0 and math.isfinite(kwh) else None
        model = None if pd.isna(row["gpu_model"]) else str(row["gpu_model"])
        out[str(row["job_id"])] = JobDraw(rate, model, str(row["cluster"]) or None)
    return out


def with_recoverable(
    findings: Sequence[Finding],
    draws: dict[str, JobDraw],
    prices: Prices,
    catalog: JobCatalog,
) -> list[Finding]:
    """The findings with `recoverable_kwh` (and money, where priced) in their evidence."""
    out = []
    for finding in findings:
        draw = draws.get(finding.job_id or "")
        if draw is None or finding.wasted_gpu_hours <= 0:
            out.append(finding)
            continue
        evidence = dict(finding.evidence)
        if draw.kwh_per_gpu_h is not None:
            evidence.setdefault(KWH, round(finding.wasted_gpu_hours * draw.kwh_per_gpu_h, 4))
        info = catalog.get(finding.job_id or "")
        team = info.team if info is not None else None
        money = prices.money(finding.wasted_gpu_hours, draw.gpu_model, team, draw.cluster)
        if money is not None and MONEY not in evidence:
            evidence[MONEY] = round(money, 2)
            evidence[CURRENCY] = prices.currency
        out.append(dataclasses.replace(finding, evidence=evidence))
    return out


def recoverable(
    findings: Sequence[Finding],
    con: duckdb.DuckDBPyConnection,
    window: Window,
    catalog: JobCatalog,
    prices: Prices,
    *,
    default_interval_s: float,
    max_gap_s: float,
) -> list[Finding]:
    """`with_recoverable` on the window's telemetry: one query, for the jobs with waste only."""
    jobs = sorted({f.job_id for f in findings if f.job_id and f.wasted_gpu_hours > 0})
    if not jobs:
        return list(findings)
    draws = job_draws(con, window, jobs, default_interval_s, max_gap_s)
    return with_recoverable(findings, draws, prices, catalog)
