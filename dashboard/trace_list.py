"""The Traces page's rows: per captured trace its job, host, time, duration, GPU activity and top
finding, read from the summary the server stored when the trace was analysed (`traces.summary`,
`analyzers.traces.summary`); a trace no analysis has covered yet shows "-" there.

Duration is the profiled steps times their mean step (what the capture covered); GPU busy is the
kernels' busy time over their span (`temporal_breakdown`), "no GPU kernels" for a CPU-only
process. The top finding is the one whose fix gives back the most (its GPU-h/week projection).
Pure: frames in, a frame out.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from analyzers.plain import rule_name

COLUMNS = ("host", "duration_ms", "gpu", "top_finding", "findings")


def _summary(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def duration_ms(summary: dict[str, Any]) -> float | None:
    """The longest rank's profiled steps x mean step, in ms; None without steps."""
    spans = []
    for head in summary.get("headline", {}).values():
        steps, mean_ms = _number(head.get("steps")), _number(head.get("mean_step_ms"))
        if steps and mean_ms is not None:
            spans.append(steps * mean_ms)
    return max(spans) if spans else None


def gpu_text(summary: dict[str, Any]) -> str:
    """ "GPU busy 62 %" over the ranks' kernel spans, or "no GPU kernels"."""
    if not summary:
        return "-"
    busy = span = 0.0
    for values in summary.get("per_rank", {}).get("temporal_breakdown", {}).values():
        busy += _number(values.get("gpu_busy_us")) or 0.0
        span += _number(values.get("kernel_time_us")) or 0.0
    return f"GPU busy {100 * busy / span:.0f} %" if span > 0 else "no GPU kernels"


def top_finding(summary: dict[str, Any]) -> str:
    """The finding with the most GPU-h/week to give back (the first one when none has any)."""
    found = [f for f in summary.get("findings", []) if isinstance(f, dict)]
    if not found:
        return "none" if summary else "-"
    best = max(found, key=lambda f: _number(f.get("wasted_gpu_hours")) or 0.0)
    rule = str(best.get("rule_id", ""))
    hours = _number(best.get("wasted_gpu_hours")) or 0.0
    gain = f" · {hours:,.1f} GPU-h/week" if hours >= 0.05 else ""
    return f"{rule} {rule_name(rule)}{gain}"


def with_summaries(traces: pd.DataFrame, stored: pd.DataFrame) -> pd.DataFrame:
    """`traces` (dashboard.data.trace_list) with COLUMNS from the catalog's `traces` rows."""
    by_id: dict[str, dict[str, Any]] = {}
    hosts: dict[str, Any] = {}
    if not stored.empty and "trace_id" in stored.columns:
        for record in stored.to_dict("records"):
            by_id[str(record["trace_id"])] = _summary(record.get("summary"))
            hosts[str(record["trace_id"])] = record.get("host")
    out = traces.copy()
    summaries = [by_id.get(str(t), {}) for t in out["trace_id"]]
    out["host"] = [
        hosts.get(str(t)) or s.get("host") for t, s in zip(out["trace_id"], summaries, strict=True)
    ]
    out["duration_ms"] = [duration_ms(s) for s in summaries]
    out["gpu"] = [gpu_text(s) for s in summaries]
    out["top_finding"] = [top_finding(s) for s in summaries]
    out["findings"] = [len(s.get("findings", [])) if s else None for s in summaries]
    return out
