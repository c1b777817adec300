"""Top GPU kernels by total time, per rank, with plain statistics: HTA's per-kernel table folds
names past the 80th cumulative percentile into "others" and reports a named kernel's
max/min/mean as its total (trace-semantics.md section 5); this keeps per-call statistics.
"""

from __future__ import annotations

import numpy as np

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, rank_by_rank
from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import RankFrame

PLUGIN_ORDER = 160  # its place in the trace report (fleetscope.plugins)


@analysis("top_kernels", "Top kernels by GPU time", None, "per-invocation statistics")
@rank_by_rank(
    "top_kernels", ("rank", "name", "class", "calls", "total_us", "mean_us", "max_us", "share")
)
def top_kernels(frame: RankFrame, options: TraceOptions) -> RankRows:
    sel = np.flatnonzero(frame.gpu_op)
    dur = frame.dur[sel]
    ids, inverse = np.unique(frame.name[sel], return_inverse=True)
    totals = np.bincount(inverse, weights=dur)
    grand = float(dur.sum())
    rows = []
    for k in np.argsort(-totals, kind="stable")[: options.top_kernels].tolist():
        d, total = dur[inverse == k], float(totals[k])
        kind = KernelClass(int(frame.kernel_class[sel][inverse == k][0])).name
        share = total / grand if grand else float("nan")
        stats = (len(d), total, float(d.mean()), float(d.max()), share)
        rows.append((frame.rank, frame.texts[int(ids[k])], kind, *stats))
    return RankRows(rows)
