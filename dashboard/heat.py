"""The Fleet page's heatmap cells: per (bucket, cluster, host) the active % of the host's
*allocated* GPU-hours, and how much of the host was allocated at all, so an idle allocated GPU
(a job holds it, nothing runs: dark) reads differently from an unallocated one (no job: grey).

Derived from the page's accounted buckets (`analyzers.accounting.usage`), like every fleet view.
"""

from __future__ import annotations

import pandas as pd

CELL_COLUMNS = ("bucket", "cluster", "host", "active_pct", "allocated_pct", "state")


def host_cells(buckets: pd.DataFrame) -> pd.DataFrame:
    """CELL_COLUMNS: `active_pct` over allocated hours (NaN where none were), `allocated_pct`
    the share of the host's GPU-hours a job held, `state` "allocated" or "unallocated"."""
    if buckets.empty:
        return pd.DataFrame(columns=list(CELL_COLUMNS))
    held = buckets["job_id"].notna()
    frame = buckets.assign(
        seen_h=buckets["gpu_h"],
        alloc_h=buckets["gpu_h"].where(held, 0.0),
        alloc_known_h=buckets["known_h"].where(held, 0.0),
        alloc_active_h=buckets["active_h"].where(held, 0.0),
    )
    cells = frame.groupby(["bucket", "cluster", "host"], as_index=False)[
        ["seen_h", "alloc_h", "alloc_known_h", "alloc_active_h"]
    ].sum()
    known = cells["alloc_known_h"].where(cells["alloc_known_h"] > 0)
    cells["active_pct"] = 100.0 * cells["alloc_active_h"] / known
    seen = cells["seen_h"].where(cells["seen_h"] > 0)
    cells["allocated_pct"] = (100.0 * cells["alloc_h"] / seen).fillna(0.0)
    cells["state"] = ["allocated" if h > 0 else "unallocated" for h in cells["alloc_h"]]
    return cells[list(CELL_COLUMNS)]
