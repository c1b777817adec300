"""What a trace adds to the telemetry finding that asked for it, and the trace findings that
enter the fleet ranking in its place.

Each trigger rule has the trace rules that refine it and the what-if scenario that prices its
fix: P1 (data-loader stall) by T8 and `dataloader_workers`; R7 (no tensor cores) by T10 and
`amp`; R6 (low SM activity) by T5/T1 and the best scenario; R9 (host-bound) by T2/T3/T1 and
`cuda_graphs`. The refining trace findings are stored on the telemetry finding's job and
identity bucket, so the ranking (analyzers.reports.ranking) counts the job's hours once: the
larger estimate wins, never the sum. Pure: no I/O.

Units: a trace finding's GPU-hours are a rate, its what-if saving for a week of the job's GPUs
(analyzers.traces: `fleetscope trace analyze` prints them per week). Every other finding in the
ranking holds the GPU-hours of its own window. So a refining finding is priced on the window it
is stored in: the weekly figure times that window's share of a week. Stored as it was, a 5-second
profile of a one-GPU job ranked as 166 GPU-h "in the last hour" of a 128-GPU demo fleet.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from analyzers.findings import Finding

__all__ = ["REFINES", "in_window", "refined_findings", "trace_evidence"]

REFINES: dict[str, tuple[str, ...]] = {
    "P1": ("T8",),
    "R7": ("T10",),
    "R6": ("T5", "T1"),
    "R9": ("T2", "T3", "T1"),
}
PRICE_SCENARIO: dict[str, str | None] = {
    "P1": "dataloader_workers",
    "R7": "amp",
    "R6": None,  # the best scenario
    "R9": "cuda_graphs",
}
TOP_KERNELS = 5


def _price(summary: dict[str, Any], rule_id: str | None) -> dict[str, Any] | None:
    rows = [r for r in summary.get("whatif", {}).get("tables", {}).get("whatif", []) if r]
    rows = [r for r in rows if r.get("rank") == min((x.get("rank", 0) for x in rows), default=0)]
    if not rows:
        return None
    wanted = PRICE_SCENARIO.get(rule_id or "")
    pick = [r for r in rows if r["scenario"] == wanted] if wanted else []
    if not pick:
        pick = sorted(rows, key=lambda r: -(r.get("saved_fraction") or 0.0))[:1]
    row = pick[0]
    return {
        "scenario": row["scenario"],
        "step_ms": row["baseline_step_us"] / 1000.0,
        "estimated_step_ms": row["estimated_step_us"] / 1000.0,
        "interval_ms": [row["estimated_low_us"] / 1000.0, row["estimated_high_us"] / 1000.0],
        "saved_fraction": row["saved_fraction"],
        "gpu_hours_saved_per_week": row["gpu_hours_saved_per_week"],
        "assumptions": row.get("assumptions"),
    }


def trace_evidence(summary: dict[str, Any], rule_id: str | None) -> dict[str, Any]:
    """The trace's evidence for the finding: headline, the refining trace findings, the top
    kernels, the data-loader stall's stack where the trace has one, and the what-if price."""
    wanted = set(REFINES.get(rule_id or "", ()))
    found = [f for f in summary.get("findings", []) if not wanted or f["rule_id"] in wanted]
    kernels = summary.get("top_kernels", {}).get("top_kernels", [])[:TOP_KERNELS]
    stacks = [f["evidence"].get("stack") for f in found if f["evidence"].get("stack")]
    return {
        "trace_id": summary.get("trace_id"),
        "headline": summary.get("headline", {}),
        "trace_findings": [
            {
                "rule_id": f["rule_id"],
                "title": f["title"],
                "gpu_hours_per_week": f["wasted_gpu_hours"],  # a trace's rate (see Units above)
            }
            for f in found
        ],
        "top_kernels": kernels,
        "stall_stack": stacks[0] if stacks else None,
        "price": _price(summary, rule_id),
    }


def refined_findings(
    summary: dict[str, Any],
    *,
    rule_id: str | None,
    job_id: str,
    window_start: datetime,
    window_end: datetime,
    bucket_start: datetime | None,
) -> list[Finding]:
    """The trace findings that refine `rule_id` (all of them for a periodic profile), moved onto
    the telemetry finding's job, window and identity bucket."""
    wanted = set(REFINES.get(rule_id or "", ()))
    window_h = max(0.0, (window_end - window_start).total_seconds() / 3600.0)
    out = []
    for data in summary.get("findings", []):
        if wanted and data["rule_id"] not in wanted:
            continue
        finding = Finding.from_dict(data)
        per_week = finding.wasted_gpu_hours
        out.append(
            dataclasses.replace(
                finding,
                job_id=job_id,
                window_start=window_start,
                window_end=window_end,
                bucket_start=bucket_start or window_start,
                scope=f"trace:{summary.get('trace_id')}",
                wasted_gpu_hours=in_window(per_week, window_h),
                estimate_method=f"{finding.estimate_method}; here {per_week:.4g} GPU-h a week "
                f"priced on this finding's window ({window_h:.4g} h)",
                evidence={
                    **finding.evidence,
                    "refines": rule_id,
                    "gpu_hours_saved_per_week": per_week,
                },
            )
        )
    return out


def in_window(gpu_hours_per_week: float, window_h: float) -> float:
    """A trace's weekly what-if saving over `window_h` hours of the job (the analyses' week is
    `OPTIONS.hours_per_week`, the options the server analyses uploads with). Imported here: the
    server loads this plug-in at start, and the trace modules bring numpy (~75 ms)."""
    from analyzers.traces.document import OPTIONS

    return gpu_hours_per_week * window_h / OPTIONS.hours_per_week
