"""The job efficiency summary behind `fleetscope job JOB`, in the spirit of jobstats' per-job
report: allocated GPU-hours, active / SM / tensor fractions, memory peak, per GPU, plus the job's
findings. Fractions follow rules.md's accounting (analyzers.accounting.frames). When the profiling fields are
absent the summary says so and how to enable them, instead of printing zeros.

This module must never write anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from analyzers.accounting.cost import Prices
from analyzers.accounting.energy import energy_source, job_energy
from analyzers.accounting.frames import FrameParams, prepare
from analyzers.mfu.measured import job_mfu
from analyzers.mfu.mfu import Mfu, proxy_mfu
from analyzers.plain import plain, to_text, utc_span
from analyzers.rules._common import fetch, utc
from analyzers.run.window import Window
from fleetscope.errors import NotFoundError

if TYPE_CHECKING:
    import duckdb

    from analyzers.findings import Finding

ENABLE_PROFILING = (
    "SM_ACTIVE, PIPE_TENSOR_ACTIVE and DRAM_ACTIVE are not reported for this job: dcgm-exporter's "
    "default counters CSV ships them disabled. Uncomment DCGM_FI_PROF_SM_ACTIVE, "
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE and DCGM_FI_PROF_DRAM_ACTIVE in default-counters.csv (or pass "
    "-f with your own CSV) and restart the exporter; rules R6-R8 stay silent until then."
)


@dataclass
class JobSummary:
    job_id: str
    start: str
    end: str
    hosts: list[str]
    gpu_models: list[str]
    allocated_gpu_hours: float
    active_frac: float | None
    sm_frac: float | None
    tensor_frac: float | None
    memory_peak_mib: float | None
    per_gpu: list[dict[str, Any]]
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    energy_kwh: float | None = None  # analyzers.accounting.energy
    idle_energy_kwh: float | None = None
    energy_source: str = "none"  # counter, power (integrated), mixed or none
    co2e_kg: float | None = None  # only with cost.grid_gco2e_per_kwh set
    money: float | None = None  # allocated GPU-hours priced; only where a price is set
    currency: str = ""
    mfu: Mfu | None = None  # measured (analyzers.mfu.measured): only where the SDK sent FLOPs


def summarize(
    conn: duckdb.DuckDBPyConnection,
    job_id: str,
    prices: Prices | None = None,
    team: str | None = None,
) -> JobSummary:
    row = conn.execute(
        "SELECT epoch(min(ts)), epoch(max(ts)) FROM gpu_samples WHERE job_id = ?", [job_id]
    ).fetchone()
    if row is None or row[0] is None:
        raise NotFoundError(f"no GPU samples for job {job_id!r}")
    window = Window(utc(row[0]), utc(row[1]) + timedelta(seconds=1))
    frame = prepare(conn, window, job_id=job_id)
    per_gpu = fetch(
        conn,
        f"""SELECT host, gpu, gpu_model, alloc_h, active_mean, sm_mean, tensor_mean,
                   fb_used_max_mib, util_mean_all
            FROM {frame.jobgpu} ORDER BY host, gpu""",
    )

    def weighted(key: str) -> float | None:
        pairs = [(g[key], g["alloc_h"]) for g in per_gpu if g[key] is not None]
        hours = sum(h for _, h in pairs)
        return sum(v * h for v, h in pairs) / hours if hours else None

    sm = weighted("sm_mean")
    summary = JobSummary(
        job_id=job_id,
        start=window.start.isoformat(),
        end=window.end.isoformat(),
        hosts=sorted({g["host"] for g in per_gpu}),
        gpu_models=sorted({g["gpu_model"] for g in per_gpu if g["gpu_model"]}),
        allocated_gpu_hours=sum(g["alloc_h"] for g in per_gpu),
        active_frac=weighted("active_mean"),
        sm_frac=sm,
        tensor_frac=weighted("tensor_mean"),
        memory_peak_mib=max(
            (g["fb_used_max_mib"] for g in per_gpu if g["fb_used_max_mib"] is not None),
            default=None,
        ),
        per_gpu=per_gpu,
    )
    if sm is None:
        summary.notes.append(ENABLE_PROFILING)
    _add_energy(conn, window, summary, prices or Prices(), team)
    measured = job_mfu(conn, window, [job_id]).get(job_id)
    summary.mfu = measured[0] if measured else None
    conn.execute(f"DROP TABLE IF EXISTS {frame.gpu}")
    conn.execute(f"DROP TABLE IF EXISTS {frame.jobgpu}")
    return summary


def _add_energy(
    conn: duckdb.DuckDBPyConnection,
    window: Window,
    summary: JobSummary,
    prices: Prices,
    team: str | None,
) -> None:
    """The job's kWh, idle-allocated kWh, CO2e and money (docs/analyzers.md, "Energy and money")."""
    params = FrameParams()
    frame = job_energy(
        conn,
        window,
        params.default_interval_s,
        max_gap_s=params.max_gap_s,
        jobs=[summary.job_id],
    )
    if frame.empty:
        return
    row = frame.iloc[0]
    kwh = float(frame["energy_kwh"].sum(min_count=1))
    summary.energy_source = energy_source(row)
    if summary.energy_source != "none":
        summary.energy_kwh = kwh
        summary.idle_energy_kwh = float(frame["idle_energy_kwh"].sum())
        summary.co2e_kg = prices.co2e_kg(kwh)
    cluster = str(row["cluster"]) or None
    model = summary.gpu_models[0] if len(summary.gpu_models) == 1 else None
    summary.money = prices.money(summary.allocated_gpu_hours, model, team, cluster)
    summary.currency = prices.currency if summary.money is not None else ""


def _mfu_line(s: JobSummary) -> str:
    """Measured MFU needs the SDK's FLOPs per step; without them the DCGM proxy, labelled."""
    if s.mfu is not None:
        return f"MFU:                 {s.mfu.percent} measured ({s.mfu.basis})"
    proxy = proxy_mfu(s.tensor_frac)
    if proxy is None:
        return "MFU:                 n/a (no FLOPs from the SDK, no tensor-pipe activity)"
    return f"MFU:                 n/a measured; {proxy.label}: {_pct(proxy.value)}"


def _energy_lines(s: JobSummary) -> list[str]:
    if s.energy_kwh is None:
        return ["energy:              n/a (no energy counter or power reading)"]
    how = {"counter": "energy counter", "power": "power integrated", "mixed": "counter + power"}
    line = (
        f"energy:              {s.energy_kwh:.2f} kWh ({how.get(s.energy_source, s.energy_source)})"
        f", idle-allocated {s.idle_energy_kwh or 0.0:.2f} kWh"
    )
    if s.co2e_kg is not None:
        line += f", {s.co2e_kg:.2f} kg CO2e"
    out = [line]
    if s.money is not None:
        out.append(f"cost:                {s.money:,.2f} {s.currency} (allocated GPU-hours priced)")
    return out


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f} %"


def render(s: JobSummary) -> str:
    out = [
        f"Job {s.job_id}   {utc_span(datetime.fromisoformat(s.start), datetime.fromisoformat(s.end))}",
        f"hosts: {', '.join(s.hosts)}   GPUs: {len(s.per_gpu)} x {', '.join(s.gpu_models) or '?'}",
        f"allocated GPU-hours: {s.allocated_gpu_hours:.2f}",
        f"active (GR engine):  {_pct(s.active_frac)}",
        f"SM active:           {_pct(s.sm_frac)}",
        f"tensor active:       {_pct(s.tensor_frac)}",
        "memory peak:         "
        + ("n/a" if s.memory_peak_mib is None else f"{s.memory_peak_mib / 1024:.1f} GiB"),
        *_energy_lines(s),
        _mfu_line(s),
        "",
        f"{'host':<16} {'gpu':<8} {'GPU-h':>7} {'active':>8} {'SM':>8} {'tensor':>8}",
    ]
    out += [
        f"{g['host'][:16]:<16} {g['gpu']:<8} {g['alloc_h']:>7.2f} {_pct(g['active_mean']):>8} "
        f"{_pct(g['sm_mean']):>8} {_pct(g['tensor_mean']):>8}"
        for g in s.per_gpu
    ]
    if s.findings:
        out += ["", "findings:"]
        out += [to_text(plain(f)) for f in sorted(s.findings, key=lambda f: -f.wasted_gpu_hours)]
    else:
        out += ["", "findings: none"]
    out += ["", *[f"note: {n}" for n in s.notes]] if s.notes else []
    return "\n".join(out)
