"""The trace page's view of a PyTorch profiler (Kineto) trace: GPU ops, breakdown, gaps, top kernels.

The trace analyses proper live in `analyzers.traces` (HTA-compatible, fast); this module is the
page's small reader for what it draws, following HTA 0.5.0's rules where it reports the same
figures (`shared/trace-semantics.md`): GPU ops are events with a duration, `args.stream` >= 0 and `args.correlation` >= 0
(section 1.6), with its ns rounding (1.3);
kernel classes by name (HEAD's patterns, section 2); the temporal breakdown of section 3 (idle =
GPU busy span minus the union of GPU ops). It must never modify a trace file.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from fleetscope.errors import CorruptTraceError, TruncatedTraceError

_COMMUNICATION = re.compile(r"(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)")
_MEMORY = re.compile(r"(^(hip)?Memcpy)|(^(hip)?Memset)|(^dma)")
_NOT_COMPUTE = re.compile(
    r"(^nccl)|(.*Memcpy)|(.*Memset)|(.*dma)|(^.*Sync)|(^Stream Wait Event)|(cuda.*LaunchKernel)"
)


def kernel_kind(name: str) -> str:
    """HTA's kernel class of a GPU op, by name only: communication, memory, computation, other."""
    if _COMMUNICATION.match(name):
        return "communication"
    if _MEMORY.match(name):
        return "memory"
    if not _NOT_COMPUTE.match(name):
        return "computation"
    return "other"


def read_events(path: Path) -> list[dict[str, object]]:
    """`traceEvents` of a .json or .json.gz trace; a clear error for anything else."""
    try:
        raw = path.read_bytes()
        text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        document = json.loads(text)
    except EOFError as exc:
        raise TruncatedTraceError(f"{path}: the file ends early") from exc
    except (OSError, ValueError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise CorruptTraceError(f"{path}: no such trace file") from exc
        raise CorruptTraceError(f"{path}: not a Kineto trace ({exc})") from exc
    events = document.get("traceEvents") if isinstance(document, dict) else None
    if not isinstance(events, list):
        raise CorruptTraceError(f"{path}: no traceEvents list")
    return events


def gpu_ops(events: list[dict[str, object]]) -> pd.DataFrame:
    """GPU ops as (name, kind, stream, start_us, dur_us, end_us), start relative to the first op."""
    rows = []
    fractional = False
    for event in events:
        args = event.get("args")
        if not isinstance(args, dict) or "dur" not in event or event.get("cat") in (None, "Trace"):
            continue
        stream, correlation = args.get("stream"), args.get("correlation", -1)
        if not isinstance(stream, int | float) or stream < 0:
            continue
        if not isinstance(correlation, int | float) or correlation < 0:
            continue
        ts, dur = event["ts"], event["dur"]
        fractional = fractional or isinstance(ts, float)
        rows.append((str(event.get("name", "")), int(stream), float(str(ts)), float(str(dur))))
    frame = pd.DataFrame(rows, columns=["name", "stream", "start_us", "dur_us"])
    frame["kind"] = [kernel_kind(n) for n in frame["name"]]
    if fractional:  # HTA's ns rounding (section 1.3): ts up, end down, to whole microseconds
        end = np.floor(frame["start_us"] + frame["dur_us"])
        frame["start_us"] = np.ceil(frame["start_us"])
        frame["dur_us"] = end - frame["start_us"]
    if not frame.empty:
        frame["start_us"] -= frame["start_us"].min()
    frame["end_us"] = frame["start_us"] + frame["dur_us"]
    return frame.sort_values(["start_us", "stream"]).reset_index(drop=True)


def _union_us(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of intervals (touching intervals merge), as HTA's merge does."""
    if len(starts) == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    running_end = np.maximum.accumulate(ends)
    new_group = np.concatenate(([True], starts[1:] > running_end[:-1]))
    group = np.cumsum(new_group) - 1
    group_start = starts[new_group]
    group_end = np.zeros(len(group_start))
    np.maximum.at(group_end, group, ends)
    return float((group_end - group_start).sum())


@dataclass(frozen=True)
class TemporalBreakdown:
    """HTA's temporal breakdown (section 3), in microseconds."""

    kernel_time_us: float
    idle_time_us: float
    compute_time_us: float
    non_compute_time_us: float

    def as_frame(self) -> pd.DataFrame:
        total = self.kernel_time_us or 1.0
        parts = {
            "idle": self.idle_time_us,
            "compute": self.compute_time_us,
            "non-compute": self.non_compute_time_us,
        }
        return pd.DataFrame(
            {
                "category": list(parts),
                "time_ms": [v / 1000 for v in parts.values()],
                "pct": [round(100 * v / total, 2) for v in parts.values()],
            }
        )


def temporal_breakdown(ops: pd.DataFrame) -> TemporalBreakdown:
    if ops.empty:
        return TemporalBreakdown(0.0, 0.0, 0.0, 0.0)
    starts, ends = ops["start_us"].to_numpy(), ops["end_us"].to_numpy()
    span = float(ends.max() - starts.min())
    busy = _union_us(starts, ends)
    compute = ops[ops["kind"] == "computation"]
    compute_us = _union_us(compute["start_us"].to_numpy(), compute["end_us"].to_numpy())
    return TemporalBreakdown(span, span - busy, compute_us, busy - compute_us)


def top_kernels(ops: pd.DataFrame, limit: int = 15) -> pd.DataFrame:
    """Kernels by total GPU time: calls, total and mean microseconds, share of all GPU-op time."""
    grouped = ops.groupby(["name", "kind"], as_index=False).agg(
        calls=("dur_us", "size"), total_us=("dur_us", "sum"), mean_us=("dur_us", "mean")
    )
    grouped["share_pct"] = 100 * grouped["total_us"] / max(float(ops["dur_us"].sum()), 1e-9)
    return grouped.nlargest(limit, "total_us").reset_index(drop=True)


def stream_gaps(ops: pd.DataFrame) -> pd.DataFrame:
    """Per stream: ops, busy time, summed idle gaps between consecutive ops and the largest gap."""
    rows = []
    for stream, group in ops.groupby("stream"):
        gaps = (group["start_us"].to_numpy()[1:] - group["end_us"].to_numpy()[:-1]).clip(min=0)
        rows.append(
            {
                "stream": stream,
                "ops": len(group),
                "busy_ms": float(group["dur_us"].sum()) / 1000,
                "idle_gaps_ms": float(gaps.sum()) / 1000,
                "largest_gap_ms": float(gaps.max()) / 1000 if len(gaps) else 0.0,
            }
        )
    return pd.DataFrame(rows)


def what_if(breakdown: TemporalBreakdown) -> pd.DataFrame:
    """Upper-bound estimates of what each fix returns: the busy span shortens by the time removed.

    Removing all idle time is the ceiling of fixing host-side stalls (data loading, launch
    overhead, synchronization); overlapping all non-compute time is the ceiling of overlapping
    communication and copies with compute.
    """
    span = breakdown.kernel_time_us or 1.0
    scenarios = {
        "remove GPU idle time (input pipeline, launches, syncs)": breakdown.idle_time_us,
        "overlap all non-compute ops with compute": breakdown.non_compute_time_us,
        "both": breakdown.idle_time_us + breakdown.non_compute_time_us,
    }
    return pd.DataFrame(
        {
            "what if": list(scenarios),
            "time_saved_ms": [v / 1000 for v in scenarios.values()],
            "speedup": [span / max(span - v, 1e-9) for v in scenarios.values()],
        }
    )
