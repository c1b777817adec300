"""Turn a `TraceReport` into JSON-ready data or a plain-text report (what the CLI prints). Both
leave out the per-launch tables (thousands of rows; `launch_summary` sums them up, the API keeps
them). Never reads files, never computes analyses.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from analyzers.traces.analyses import load_registry
from analyzers.traces.analyses.base import Table
from analyzers.traces.api import TraceReport
from analyzers.traces.frame import Mode

MAX_TEXT_ROWS = 12


def _shown(tables: Sequence[Table]) -> list[Table]:  # all but the per-launch tables
    return [t for t in tables if not t.name.startswith("cuda_kernel_launch_stats_rank")]


def json_ready(value: Any, *, finite: bool = False) -> Any:
    """Plain JSON values: NaN null, numpy scalars plain; with `finite`, infinities null too (the
    stored document: PostgreSQL's JSON refuses them; the CLI's JSON keeps them as it always has)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or (finite and math.isinf(value))):
        return None
    if isinstance(value, dict):
        return {str(k): json_ready(v, finite=finite) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v, finite=finite) for v in value]
    return value


def analyses_data(
    report: TraceReport, table: Callable[[Table], Any] = Table.records
) -> dict[str, dict[str, Any]]:
    """Each analysis's tables (as `table` gives them), per-rank numbers and notes."""
    return {
        name: {
            "tables": {t.name: table(t) for t in _shown(result.tables)},
            "per_rank": result.per_rank,
            "notes": list(result.notes),
        }
        for name, result in report.results.items()
    }


def report_to_dict(report: TraceReport) -> dict[str, Any]:
    registry = load_registry()
    trace = report.trace
    native = trace.mode is Mode.NATIVE
    analyses = {
        name: {
            "title": registry[name].title,
            "hta_api": registry[name].hta_api,
            "differs_from_hta": registry[name].beyond_hta if native else None,
            **part,
        }
        for name, part in analyses_data(report).items()
    }
    data: dict[str, Any] = json_ready(
        {
            "source": str(trace.source),
            "mode": str(trace.mode),
            "ranks": sorted(trace.ranks),
            "files": {r: f.path.name for r, f in trace.ranks.items()},
            "notes": trace.notes,
            "analyses": analyses,
            "findings": [f.to_dict() for f in report.findings] if report.judged else None,
        }
    )
    return data


def report_json(reports: Sequence[TraceReport]) -> str:
    """The CLI's `--format json`: one report's `report_to_dict` (a list of them for several)."""
    data = [report_to_dict(r) for r in reports]
    return json.dumps(data[0] if len(data) == 1 else data, indent=1) + "\n"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value)}"
        return f"{value:.4g}" if abs(value) < 1e4 else f"{value:.0f}"
    return clip(value, 60)


def clip(value: Any, width: int) -> str:
    text = str(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def _table_text(table: Table) -> list[str]:
    if not table.rows:
        return [f"  ({table.name}: no rows)"]
    cells = [list(table.columns), *([_fmt(v) for v in row] for row in table.rows[:MAX_TEXT_ROWS])]
    widths = [max(len(row[i]) for row in cells) for i in range(len(table.columns))]
    lines = ["  " + "  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    if len(table.rows) > MAX_TEXT_ROWS:
        lines.append(f"  ... {len(table.rows) - MAX_TEXT_ROWS} more rows (--format json for all)")
    return lines


def render_text(report: TraceReport) -> str:
    registry = load_registry()
    trace = report.trace
    mode = "HTA 0.5.0 compatible" if trace.mode is Mode.HTA else "fleetscope definitions"
    out = [f"trace {trace.source}  ranks {sorted(trace.ranks)}  ({mode})"]
    out += [f"note: {n}" for n in trace.notes]
    for name, result in report.results.items():
        spec = registry[name]
        out += ["", f"== {spec.title}" + (f"  [HTA: {spec.hta_api}]" if spec.hta_api else "")]
        if trace.mode is Mode.NATIVE and spec.hta_api:
            out.append(f"  differs from HTA: {spec.beyond_hta}")
        for table in _shown(result.tables):
            out += _table_text(table)
        out += [f"  note: {n}" for n in result.notes]
    out.append("")
    if not report.judged:
        out.append("== Findings: not judged (only some analyses ran; the rules read them all)")
    else:
        out.append(f"== Findings ({len(report.findings)})")
    for f in report.findings:
        hours = f"  (~{f.wasted_gpu_hours:.1f} GPU-h/week)" if f.wasted_gpu_hours else ""
        out += [f"  [{f.rule_id} {f.severity}] {f.title}{hours}", f"      fix: {f.recommendation}"]
    return "\n".join(out)
