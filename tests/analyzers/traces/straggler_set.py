"""A 3-rank set with one straggler, built from the real single-rank NCCL trace (stdlib only: the
HTA golden script imports it too, in HTA's own environment).

Rank r is the real trace with every event `DELAY_US[r]` later, as if its host were slower, and its
NCCL kernels longer by `max(DELAY_US) - DELAY_US[r]`: a collective ends when its last rank
arrives, so the punctual ranks wait in it. Rank 2 starts last; rank 1 next. `"rank": r` is written
with the space HTA's rank regex needs.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2] / "data" / "traces" / "hta_nccl_data_rank0"
DELAY_US = (0.0, 300.0, 1500.0)


def build(folder: Path, source: Path = SOURCE / "nccl_data.json.gz") -> Path:
    """Write rank0..rank2 `.json.gz` files into `folder` and return it."""
    with gzip.open(source, "rt") as f:
        trace = json.load(f)
    folder.mkdir(parents=True, exist_ok=True)
    worst = max(DELAY_US)
    for rank, delay in enumerate(DELAY_US):
        events = []
        for event in trace["traceEvents"]:
            event = dict(event)
            if isinstance(event.get("ts"), (int, float)):
                event["ts"] = event["ts"] + delay
            if str(event.get("name", "")).startswith("ncclKernel") and "dur" in event:
                event["dur"] = event["dur"] + (worst - delay)
            events.append(event)
        info = dict(trace.get("distributedInfo", {}), rank=rank)
        out = {**trace, "traceEvents": events, "distributedInfo": info}
        with gzip.open(folder / f"rank{rank}.json.gz", "wt") as f:
            json.dump(out, f)
    return folder
