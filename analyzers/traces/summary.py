"""The JSON summary of one analyzed trace (catalog `traces.summary`, a few kilobytes): headline
and per-rank numbers, findings, what-if and top kernels; the whole analysis is document.py's.
"""

from __future__ import annotations

from itertools import groupby, islice
from operator import itemgetter
from typing import Any

from analyzers.traces.analyses.base import TraceOptions
from analyzers.traces.api import TraceReport
from analyzers.traces.render import report_to_dict

SUMMARY_VERSION = 1


def _headline(per_rank: dict[str, dict[str, Any]], rank: str) -> dict[str, Any]:
    steps = per_rank.get("steps", {}).get(rank, {})
    loader = per_rank.get("dataloader", {}).get(rank, {})
    mean_us = steps.get("mean_step_us")
    return {
        "steps": steps.get("steps"),
        "mean_step_ms": mean_us / 1000.0 if isinstance(mean_us, int | float) else None,
        "dataloader_share": loader.get("share"),
    }


def summarize(report: TraceReport, *, trace_id: str, host: str, pid: int) -> dict[str, Any]:
    data = report_to_dict(report)
    analyses: dict[str, Any] = data["analyses"]
    per_rank = {name: result["per_rank"] for name, result in analyses.items() if result["per_rank"]}
    whatif = analyses.get("whatif", {})
    return {
        "version": SUMMARY_VERSION,
        "trace_id": trace_id,
        "host": host,
        "pid": pid,
        "mode": data["mode"],
        "ranks": data["ranks"],
        "notes": data["notes"],
        "headline": {str(rank): _headline(per_rank, str(rank)) for rank in data["ranks"]},
        "per_rank": per_rank,
        "findings": data["findings"],
        "whatif": {"tables": whatif.get("tables", {}), "notes": whatif.get("notes", [])},
        "top_kernels": _top_kernels(analyses.get("top_kernels", {}).get("tables", {})),
    }


def _top_kernels(tables: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The analysis' default number of top kernels per rank, whatever the report was run with
    (`document.OPTIONS` keeps more; a rank's rows come together, biggest first)."""
    keep = TraceOptions().top_kernels
    return {
        name: [
            row for _, ranked in groupby(rows, itemgetter("rank")) for row in islice(ranked, keep)
        ]
        for name, rows in tables.items()
    }
