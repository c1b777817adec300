"""Counter tracks for a trace viewer: launch queue length per stream and memory-copy bandwidth
per kind, as Chrome-trace counter events (`"ph": "C"`) to append to the trace.

Algorithm (HTA 0.5.0 `generate_trace_with_counters()`, `hta/analyzers/trace_counters.py`):
- Queue length ("Queue Length", `id` = the stream): queue_length.py's change points (+1 per GPU
  op at its launch, -1 at its start) summed per stream in time order; `pid`: the GPU's.
- Memory bandwidth ("Memcpy BW", `name` = the copy kind): memory_bw.py's step function.
- Each event is `{"pid", "ts", "args": {counter: value}, "ph": "C", "name"[, "id"]}` with `ts`
  back on the trace's own clock (the alignment origin added back).
`fleetscope trace counters` writes the file; the report lists each track's events and peak.
"""

from __future__ import annotations

from typing import Any

from analyzers.traces.analyses.base import RankRows, TraceOptions, analysis, rank_by_rank
from analyzers.traces.analyses.memory_bw import bandwidth_tracks
from analyzers.traces.analyses.queue_length import queue_tracks
from analyzers.traces.frame import RankFrame

PLUGIN_ORDER = 178  # after the ATen op kernels
QUEUE, BANDWIDTH = "Queue Length", "Memcpy BW"


def _number(text: str) -> int | str:
    """A pid as the trace wrote it: an integer, or its text."""
    try:
        return int(text)
    except ValueError:
        return text


def counter_events(frame: RankFrame, origin_us: float) -> list[dict[str, Any]]:
    """The rank's queue-length, then bandwidth counter events, in HTA's order."""
    pid_of = [_number(text) for text in frame.names]
    events: list[dict[str, Any]] = []
    for counter, tracks in ((QUEUE, queue_tracks(frame)), (BANDWIDTH, bandwidth_tracks(frame))):
        for series, rows, ts, levels in tracks:
            values = zip(frame.pid[rows].tolist(), ts.tolist(), levels.tolist(), strict=True)
            tag = {"name": QUEUE, "id": series} if counter == QUEUE else {"name": series}
            events += [
                {"pid": pid_of[pid], "ts": t + origin_us, "args": {counter: level}, "ph": "C"} | tag
                for pid, t, level in values
            ]
    return events


@analysis(
    "counters",
    "Counter tracks (queue length, copy bandwidth)",
    "generate_trace_with_counters",
    "the tracks are summarised here; `fleetscope trace counters` writes the trace",
)
@rank_by_rank("counter_tracks", ("rank", "counter", "series", "events", "peak"))
def counters(frame: RankFrame, options: TraceOptions) -> RankRows:
    return RankRows([(frame.rank, *track) for track in counter_tracks(frame)])


def counter_tracks(frame: RankFrame) -> list[tuple[str, str, int, float]]:
    """(counter, series, events, peak) of each track `counter_events` writes, sorted, without
    building its events (millions of dicts on a large rank)."""
    tracks = [(QUEUE, str(s), len(v), float(max(v.tolist()))) for s, _, _, v in queue_tracks(frame)]
    tracks += [(BANDWIDTH, k, len(v), max(v.tolist())) for k, _, _, v in bandwidth_tracks(frame)]
    return sorted(tracks)
