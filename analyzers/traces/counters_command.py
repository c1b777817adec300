"""`fleetscope trace counters PATH`: write each rank's trace again with counter tracks (launch
queue length per stream, copy bandwidth per kind) a trace viewer (Perfetto, chrome://tracing)
draws under the timeline, as HTA's `generate_trace_with_counters` does (analyses/counters.py).
The original events are copied unchanged; a bad path is a TraceError (message and exit code at
the edge). Reads files and no setting.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["register"]


def register(sub: Any) -> None:
    counters = sub.add_parser(
        "counters",
        help="write the trace with queue-length and copy-bandwidth counter tracks",
        description="Write each rank's trace again, with counter events for the launch queue "
        "length of every stream and the bandwidth of every copy kind (HTA 0.5.0 "
        "generate_trace_with_counters), as OUT/<name>_with_counters.json.gz.",
    )
    counters.add_argument("path", metavar="PATH", help="trace file or folder of ranks")
    counters.add_argument("--out", default=".", help="folder to write to (default: .)")
    counters.add_argument(
        "--hta-compatible",
        action="store_true",
        help="use HTA 0.5.0's load rules (ns rounding, last step dropped), as HTA's tracks do",
    )
    counters.set_defaults(standalone=_counters)


def _counters(args: argparse.Namespace) -> int:
    from analyzers.traces.analyses.counters import counter_events
    from analyzers.traces.api import load_trace_set
    from fleetscope.errors import TraceError

    trace = load_trace_set(args.path, hta_compatible=args.hta_compatible)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise TraceError(f"--out {out}: not a folder")
    out.mkdir(parents=True, exist_ok=True)
    for frame in trace.frames():
        events = counter_events(frame, trace.origin_us)
        opener = gzip.open if frame.path.name.endswith(".gz") else open
        with opener(frame.path, "rt") as f:
            content = json.load(f)
        content.setdefault("traceEvents", []).extend(events)
        name = frame.path.name.removesuffix(".gz").removesuffix(".json")
        target = out / f"{name}_with_counters.json.gz"
        with gzip.open(target, "wt") as f:
            json.dump(content, f)
        sys.stdout.write(f"{target}  rank {frame.rank}: {len(events)} counter events\n")
    return 0
