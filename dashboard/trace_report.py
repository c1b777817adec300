"""What the trace page draws, laid out from the analyzers' document on the trace.

The document (`analyzers.traces.document.analysis_document`: every analysis's tables, the trace
rules' findings T1-T13 and the timeline's GPU ops) is built once when a trace is uploaded, under
fleetscope's definitions (exact timestamps, every ProfilerStep; what `fleetscope trace analyze`
prints), and stored in the catalog (`trace_analyses`): `stored_document` reads it back. Only
HTA 0.5.0's definitions (`--hta-compatible`), or a trace nothing analyzed yet (dropped in the
folder by hand, or uploaded to a server without the analysis plug-in), are analysed here
(`analyze_document`). This module only picks one rank's rows out of the tables: it computes no
figure of its own. Never writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analyzers.findings import Finding

__all__ = [
    "AnalysisSection",
    "RankView",
    "StepView",
    "TraceView",
    "analysis_sections",
    "analyze_document",
    "headline",
    "read_trace",
    "stored_document",
    "trace_view",
]

Document = dict[str, Any]


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
class AnalysisSection:
    """One registered analysis as stored, for one rank: its title (the registry's; the name for
    an analysis no longer installed), its tables (the rank's rows, or the whole table when it has
    no `rank` column) and its notes. Built for every analysis in the document, whatever it is,
    so a new analysis module shows on the page without a line here (issue 29)."""

    name: str
    title: str
    tables: tuple[tuple[str, pd.DataFrame], ...]
    notes: tuple[str, ...]


@dataclass(frozen=True)
class TraceView:
    """Every rank with GPU activity, every rank's steps (CPU-only ranks too), every finding, and
    the notes of the analyses (CPU-only ranks, models)."""

    mode: str
    ranks: dict[int, RankView]
    notes: tuple[str, ...]
    steps: dict[int, StepView] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    sections: dict[int, tuple[AnalysisSection, ...]] = field(default_factory=dict)


def analyze_document(path: Path, *, hta_compatible: bool = False) -> Document:
    """Analyze the trace file as the upload hook does (`document.OPTIONS`): the document it would
    have stored, under HTA's definitions when asked."""
    from analyzers.traces.api import analyze_trace
    from analyzers.traces.document import OPTIONS, analysis_document

    return analysis_document(analyze_trace(path, hta_compatible=hta_compatible, options=OPTIONS))


def stored_document(engine: Any, trace_id: str) -> Document | None:
    """The document stored when `trace_id` was uploaded; None if there is none (or no catalog)."""
    import sqlalchemy

    from warehouse.catalog.profiling import get_trace_analysis

    if engine is None:
        return None
    try:
        with engine.connect() as conn:
            return get_trace_analysis(conn, trace_id)
    except sqlalchemy.exc.DBAPIError:  # a catalog from before trace_analyses, or none yet
        return None


def headline(summary: dict[str, Any]) -> list[str]:
    """What `fleetscope profile` prints first about a trace, from its stored summary
    (`analyzers.traces.summary`): per rank the steps, mean step and data-loader share, then the
    rule ids of its findings."""
    out = []
    for rank, head in sorted(summary.get("headline", {}).items()):
        mean, share = head.get("mean_step_ms"), head.get("dataloader_share")
        out.append(
            f"rank {rank}: {head.get('steps') or 0:.0f} steps, mean step "
            + ("n/a" if mean is None else f"{mean:,.1f} ms")
            + ", data loader "
            + ("n/a" if share is None else f"{100 * share:.0f} %")
        )
    rules = sorted({str(f["rule_id"]) for f in summary.get("findings", [])}, key=_rule_order)
    out.append("findings: " + (", ".join(rules) if rules else "none"))
    return out


def _rule_order(rule_id: str) -> tuple[str, int]:
    """T2 before T10."""
    letters = rule_id.rstrip("0123456789")
    return letters, int(rule_id[len(letters) :] or 0)


def read_trace(path: Path, *, hta_compatible: bool = False) -> TraceView:
    """Analyze the trace file and lay out what the page shows."""
    return trace_view(analyze_document(path, hta_compatible=hta_compatible))


def trace_view(document: Document) -> TraceView:
    analyses = document["analyses"]
    temporal = analyses["temporal_breakdown"]
    ranks = {rank: _rank_view(document, rank) for rank in sorted(map(int, temporal["per_rank"]))}
    notes = tuple(
        note
        for name in ("temporal_breakdown", "dataloader")  # the what-if's: under its table
        if name in analyses
        for note in analyses[name]["notes"]
    )
    return TraceView(
        str(document["mode"]),
        ranks,
        (*document["notes"], *notes),
        steps=_step_views(analyses),
        findings=tuple(Finding.from_dict(f) for f in document["findings"]),
        sections={
            rank: analysis_sections(document, rank)
            for rank in sorted(map(int, document.get("ranks", ranks)))
        },
    )


def _titles() -> dict[str, str]:
    from analyzers.traces.analyses import load_registry

    return {name: spec.title for name, spec in load_registry().items()}


def analysis_sections(document: Document, rank: int) -> tuple[AnalysisSection, ...]:
    """Every analysis of the stored document, in its stored (report) order, for one rank."""
    titles = _titles()
    sections = []
    for name, result in document["analyses"].items():
        tables = []
        for table_name, stored in result.get("tables", {}).items():
            columns, rows = list(stored["columns"]), stored["rows"]
            if "rank" in columns:
                at = columns.index("rank")
                rows = [row[:at] + row[at + 1 :] for row in rows if row[at] == rank]
                columns.pop(at)
            if rows:
                tables.append((table_name, pd.DataFrame(rows, columns=columns).infer_objects()))
        sections.append(
            AnalysisSection(
                name=name,
                title=titles.get(name, name.replace("_", " ")),
                tables=tuple(tables),
                notes=tuple(result.get("notes", ())),
            )
        )
    return tuple(sections)


def _number(value: Any) -> float:
    return float("nan") if value is None else float(value)


def _step_views(analyses: dict[str, Any]) -> dict[int, StepView]:
    """Per rank: the steps analysis and the data-loader analysis side by side, per step."""
    if "steps" not in analyses or "dataloader" not in analyses:
        return {}
    per_rank = {
        name: {int(r): v for r, v in analyses[name]["per_rank"].items()}
        for name in ("steps", "dataloader")
    }
    out = {}
    for rank in sorted(set(per_rank["steps"]) | set(per_rank["dataloader"])):
        steps = _rows(analyses["steps"], "steps", rank)
        loader = _rows(analyses["dataloader"], "dataloader_share", rank)
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
        head = per_rank["steps"].get(rank, {})
        share = _number(per_rank["dataloader"].get(rank, {}).get("share"))
        mean_us = _number(head.get("mean_step_us"))
        out[rank] = StepView(
            rank=rank,
            steps=int(head.get("steps") or 0),
            mean_step_ms=None if np.isnan(mean_us) else mean_us / 1000,
            dataloader_pct=None if np.isnan(share) else 100 * share,
            table=table.sort_values("step").reset_index(drop=True),
        )
    return out


def _rows(result: dict[str, Any], table: str, rank: int) -> pd.DataFrame:
    """One rank's rows of a stored table, numbers as floats (null is NaN) as the analysis made
    them."""
    stored = result["tables"][table]
    rank_at = stored["columns"].index("rank")
    rows = [row for row in stored["rows"] if row[rank_at] == rank]
    frame = pd.DataFrame(rows, columns=stored["columns"]).drop(columns=["rank"])
    return frame.infer_objects()


def _rank_view(document: Document, rank: int) -> RankView:
    analyses = document["analyses"]
    temporal = _rows(analyses["temporal_breakdown"], "temporal_breakdown", rank).iloc[0]
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
    timeline = document["timeline"][str(rank)]
    return RankView(
        rank=rank,
        kernel_time_us=float(temporal["kernel_time(us)"]),
        idle_pct=float(temporal["idle_time_pctg"]),
        compute_pct=float(temporal["compute_time_pctg"]),
        gpu_ops=int(timeline["total"]),
        breakdown=breakdown,
        ops=_gpu_ops(timeline),
        idle_by_stream=_idle_by_stream(analyses["idle_time"], rank),
        top_kernels=_top_kernels(analyses["top_kernels"], rank),
        whatif=_whatif(analyses["whatif"], rank),
        findings=tuple(f for f in document["findings"] if f["evidence"].get("rank") == rank),
    )


def _gpu_ops(timeline: dict[str, Any]) -> pd.DataFrame:
    """The timeline's ops as the document keeps them (the first ones, in start order)."""
    names = np.asarray(timeline["names"], dtype=object)
    kinds = np.asarray(timeline["kinds"], dtype=object)
    index = np.asarray(timeline["name"], dtype=np.int64)
    ops = pd.DataFrame(
        {
            "name": names[index] if len(index) else [],
            "kind": kinds[index] if len(index) else [],
            "stream": np.asarray(timeline["stream"], dtype=np.int64),
            "start_us": np.asarray(timeline["start_us"], dtype=np.float64),
            "dur_us": np.asarray(timeline["dur_us"], dtype=np.float64),
        }
    )
    ops["end_us"] = ops["start_us"] + ops["dur_us"]
    return ops


def _idle_by_stream(result: dict[str, Any], rank: int) -> pd.DataFrame:
    rows = _rows(result, "idle_time_breakdown", rank)
    wide = rows.pivot_table(
        index="stream", columns="idle_category", values="idle_time", aggfunc="sum", fill_value=0.0
    )
    wide = wide.reindex(columns=["host_wait", "kernel_wait", "other"], fill_value=0.0) / 1000
    return wide.add_suffix("_ms").reset_index().rename_axis(columns=None)


def _top_kernels(result: dict[str, Any], rank: int) -> pd.DataFrame:
    table = _rows(result, "top_kernels", rank)
    table["class"] = table["class"].str.lower()
    table["share_pct"] = 100 * table.pop("share")
    return table


def _whatif(result: dict[str, Any], rank: int) -> pd.DataFrame:
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
