"""What the trace page draws, laid out from the analyzers' report on the trace.

`analyzers.traces.analyze_trace` loads the trace, runs every trace analysis and derives the trace
rules' findings (T1-T12): by default under fleetscope's definitions (exact timestamps, every
ProfilerStep; what `fleetscope trace analyze` prints and the profiling pipeline stores as the
catalog's trace summary), or under HTA 0.5.0's when asked (`--hta-compatible`). This module only
picks one rank's rows out of the analyses' tables, and the prepared trace's GPU ops for the
timeline: it computes no figure of its own. Never writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyzers.findings import Finding
from analyzers.traces import AnalysisResult, TraceOptions, TraceReport, analyze_trace
from analyzers.traces.classify import KernelClass

__all__ = ["TOP_KERNELS", "RankView", "StepView", "TraceView", "read_trace", "trace_view"]

TOP_KERNELS = 15  # kernels per rank in the top-kernels table (the analysis' own default is 10)


@dataclass(frozen=True)
class RankView:
    """One rank: the temporal breakdown's figures (microseconds, percent of the GPU busy span as
    the analysis rounds them), and the tables the page shows."""

    rank: int
    kernel_time_us: float
    idle_pct: float
    compute_pct: float
    gpu_ops: int
    breakdown: pd.DataFrame  # category, time_ms, pct
    ops: pd.DataFrame  # name, kind, stream, start_us, dur_us, end_us: the timeline
    idle_by_stream: pd.DataFrame  # stream, host_wait_ms, kernel_wait_ms, other_ms
    top_kernels: pd.DataFrame  # name, class, calls, total_us, mean_us, max_us, share_pct
    whatif: pd.DataFrame  # scenario, baseline/estimated step ms, saved %, GPU-h per week
    findings: tuple[dict[str, Any], ...]  # `Finding.to_dict()` of the rank's findings


@dataclass(frozen=True)
class StepView:
    """One rank's steps as `fleetscope profile` / `trace analyze` print them: the headline
    (steps, mean step, data-loader share) and the per-step table (ms, percent)."""

    rank: int
    steps: int
    mean_step_ms: float | None
    dataloader_pct: float | None
    table: pd.DataFrame  # step, duration_ms, gpu_busy_pct, dataloader_ms, dataloader_pct


@dataclass(frozen=True)
class TraceView:
    """Every rank with GPU activity, every rank's steps (CPU-only ranks too), every finding, and
    the notes of the analyses (CPU-only ranks, models)."""

    mode: str
    ranks: dict[int, RankView]
    notes: tuple[str, ...]
    steps: dict[int, StepView] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()


def read_trace(path: Path, *, hta_compatible: bool = False) -> TraceView:
    """Analyze the trace file with the analyzers' one entry point and lay out what the page shows."""
    report = analyze_trace(
        path, hta_compatible=hta_compatible, options=TraceOptions(top_kernels=TOP_KERNELS)
    )
    return trace_view(report)


def trace_view(report: TraceReport) -> TraceView:
    results = report.results
    temporal = results["temporal_breakdown"]
    ranks = {rank: _rank_view(report, rank) for rank in sorted(temporal.per_rank)}
    notes = tuple(
        note
        for name in ("temporal_breakdown", "whatif", "dataloader")
        if name in results
        for note in results[name].notes
    )
    return TraceView(
        str(report.trace.mode),
        ranks,
        (*report.trace.notes, *notes),
        steps=_step_views(report),
        findings=tuple(report.findings),
    )


def _step_views(report: TraceReport) -> dict[int, StepView]:
    """Per rank: the steps analysis and the data-loader analysis side by side, per step."""
    results = report.results
    if "steps" not in results or "dataloader" not in results:
        return {}
    out = {}
    for rank in sorted(set(results["steps"].per_rank) | set(results["dataloader"].per_rank)):
        steps = _rows(results["steps"], "steps", rank)
        loader = _rows(results["dataloader"], "dataloader_share", rank)
        table = pd.DataFrame(
            {
                "step": steps["step"],
                "duration_ms": steps["duration_us"] / 1000,
                "gpu_busy_pct": 100 * steps["gpu_busy_share"],
            }
        ).merge(
            pd.DataFrame(
                {
                    "step": loader["step"],
                    "dataloader_ms": loader["dataloader_us"] / 1000,
                    "dataloader_pct": 100 * loader["share"],
                }
            ),
            on="step",
            how="outer",
        )
        head = results["steps"].per_rank.get(rank, {})
        share = results["dataloader"].per_rank.get(rank, {}).get("share")
        mean_us = head.get("mean_step_us")
        out[rank] = StepView(
            rank=rank,
            steps=int(head.get("steps", 0)),
            mean_step_ms=None if mean_us is None or np.isnan(mean_us) else mean_us / 1000,
            dataloader_pct=None if share is None or np.isnan(share) else 100 * share,
            table=table.sort_values("step").reset_index(drop=True),
        )
    return out


def _rows(result: AnalysisResult, table: str, rank: int) -> pd.DataFrame:
    records = [r for r in result.table(table).records() if r["rank"] == rank]
    columns = list(result.table(table).columns)
    return pd.DataFrame(records, columns=columns).drop(columns=["rank"])


def _rank_view(report: TraceReport, rank: int) -> RankView:
    results = report.results
    temporal = _rows(results["temporal_breakdown"], "temporal_breakdown", rank).iloc[0]
    breakdown = pd.DataFrame(
        {
            "category": ["idle", "compute", "non-compute"],
            "time_ms": [
                temporal["idle_time(us)"] / 1000,
                temporal["compute_time(us)"] / 1000,
                temporal["non_compute_time(us)"] / 1000,
            ],
            "pct": [
                temporal["idle_time_pctg"],
                temporal["compute_time_pctg"],
                temporal["non_compute_time_pctg"],
            ],
        }
    )
    ops = _gpu_ops(report, rank)
    return RankView(
        rank=rank,
        kernel_time_us=float(temporal["kernel_time(us)"]),
        idle_pct=float(temporal["idle_time_pctg"]),
        compute_pct=float(temporal["compute_time_pctg"]),
        gpu_ops=len(ops),
        breakdown=breakdown,
        ops=ops,
        idle_by_stream=_idle_by_stream(results["idle_time"], rank),
        top_kernels=_top_kernels(results["top_kernels"], rank),
        whatif=_whatif(results["whatif"], rank),
        findings=tuple(f.to_dict() for f in report.findings if f.evidence.get("rank") == rank),
    )


def _gpu_ops(report: TraceReport, rank: int) -> pd.DataFrame:
    """The rows the temporal breakdown counts (every op on a stream), from its first op's start."""
    frame = report.trace.ranks[rank]
    rows = np.flatnonzero(frame.on_stream)
    start = frame.ts[rows]
    origin = float(start.min()) if len(rows) else 0.0
    ops = pd.DataFrame(
        {
            "name": [frame.names[i] for i in frame.name[rows].tolist()],
            "kind": [KernelClass(int(c)).name.lower() for c in frame.kernel_class[rows].tolist()],
            "stream": frame.stream[rows],
            "start_us": start - origin,
            "dur_us": frame.dur[rows],
        }
    )
    ops["end_us"] = ops["start_us"] + ops["dur_us"]
    return ops.sort_values(["start_us", "stream"], kind="stable").reset_index(drop=True)


def _idle_by_stream(result: AnalysisResult, rank: int) -> pd.DataFrame:
    rows = _rows(result, "idle_time_breakdown", rank)
    wide = rows.pivot_table(
        index="stream", columns="idle_category", values="idle_time", aggfunc="sum", fill_value=0.0
    )
    wide = wide.reindex(columns=["host_wait", "kernel_wait", "other"], fill_value=0.0) / 1000
    return wide.add_suffix("_ms").reset_index().rename_axis(columns=None)


def _top_kernels(result: AnalysisResult, rank: int) -> pd.DataFrame:
    table = _rows(result, "top_kernels", rank)
    table["class"] = table["class"].str.lower()
    table["share_pct"] = 100 * table.pop("share")
    return table


def _whatif(result: AnalysisResult, rank: int) -> pd.DataFrame:
    table = _rows(result, "whatif", rank)
    return pd.DataFrame(
        {
            "what if": table["scenario"],
            "step_ms": table["baseline_step_us"] / 1000,
            "estimated_step_ms": table["estimated_step_us"] / 1000,
            "saved_pct": 100 * table["saved_fraction"],
            "gpu_h_per_week": table["gpu_hours_saved_per_week"],
        }
    )
