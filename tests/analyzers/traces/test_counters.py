"""Counter tracks agree with HTA 0.5.0's `generate_trace_with_counters()`, and
`fleetscope trace counters` writes them into a trace a viewer (and our loader) reads.

HTA's goldens (tests/data/traces/*/hta-0.5.0/counters.json, bench/hta_api_goldens.py) summarise
the counter events HTA appended per track (there are thousands): events, the sum and last value,
the first and last timestamp and the pid. Ours are summarised the same way and equal.

HTA orders events at one timestamp by numpy's unstable quicksort, whose ties come out in an order
that differs between CPUs (AVX-512 and AVX2 kernels): the Queue Length sums of one trace differ
by a few units between machines, in HTA as in ours. Where HTA was also run on a machine with this
machine's tie order, its golden is `counters.ties-<fingerprint>.json` and is the one compared.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analyzers.traces.analyses.counters import counter_events, counter_tracks
from analyzers.traces.analyses.queue_length import RUNTIME_LAUNCHES, launch_changes
from analyzers.traces.api import load_trace_set
from analyzers.traces.frame import RankFrame
from app.cli import main
from bench.hta_api_goldens import quicksort_ties
from tests.analyzers.traces.trace_paths import DATA, MAIN_TRACES, graph_launch, trace_set


def _summary(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    tracks: dict[str, dict[str, Any]] = {}
    for e in events:
        ((counter, value),) = e["args"].items()
        t = tracks.setdefault(f"{counter}|{e.get('id', e['name'])}", {"events": 0, "sum": 0.0})
        t["first_ts"] = t.get("first_ts", e["ts"])
        t["events"] += 1
        t["sum"] += float(value)
        t["last"], t["last_ts"], t["pid"] = float(value), e["ts"], e["pid"]
    for t in tracks.values():
        t["sum"], t["last"] = round(t["sum"], 3), round(t["last"], 6)
    return tracks


@pytest.mark.parametrize("trace_dir", MAIN_TRACES, ids=lambda p: p.name)
def test_agrees_with_hta(trace_dir: Path) -> None:
    recorded = trace_dir / "hta-0.5.0"
    here = recorded / f"counters.ties-{quicksort_ties()}.json"
    golden = json.loads((here if here.exists() else recorded / "counters.json").read_text())
    trace = trace_set(trace_dir, hta_compatible=True)
    events = counter_events(trace.ranks[golden["rank"]], trace.origin_us)
    assert _summary(events) == golden["tracks"]


@pytest.mark.parametrize("hta_compatible", [False, True], ids=["native", "hta"])
@pytest.mark.parametrize("trace_dir", MAIN_TRACES, ids=lambda p: p.name)
def test_the_report_table_summarises_exactly_the_events_written(
    trace_dir: Path, hta_compatible: bool
) -> None:
    for frame in trace_set(trace_dir, hta_compatible=hta_compatible).frames():
        tracks: dict[tuple[str, str], list[float]] = {}
        for e in counter_events(frame, 0.0):
            ((counter, value),) = e["args"].items()
            tracks.setdefault((counter, str(e.get("id", e["name"]))), []).append(float(value))
        expected = [(c, s, len(v), max(v)) for (c, s), v in sorted(tracks.items())]
        assert counter_tracks(frame) == expected


def test_cli_writes_the_trace_with_its_counter_tracks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = DATA / "hta_nccl_data_rank0"
    assert main(["trace", "counters", str(source), "--out", str(tmp_path)]) == 0
    written = tmp_path / "nccl_data_with_counters.json.gz"
    assert capsys.readouterr().out == f"{written}  rank 0: 9696 counter events\n"
    with gzip.open(written, "rt") as f:
        events = json.load(f)["traceEvents"]
    with gzip.open(source / "nccl_data.json.gz", "rt") as f:
        original = json.load(f)["traceEvents"]
    assert events[: len(original)] == original
    added = events[len(original) :]
    assert {e["ph"] for e in added} == {"C"} and len(added) == 9696
    assert {e["name"] for e in added} == {"Queue Length", "Memcpy DtoD", "Memset"}
    assert len(load_trace_set(written).frames()) == 1  # the counters do not break a reader


def test_cli_reads_a_gzip_file_whatever_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The loader knows gzip by its magic bytes; the command read it again by its name, and a
    # gzip file named `.json` ended in a UnicodeDecodeError traceback.
    source = tmp_path / "in"
    source.mkdir()
    (source / "nccl_data.json").write_bytes(
        (DATA / "hta_nccl_data_rank0" / "nccl_data.json.gz").read_bytes()
    )
    assert main(["trace", "counters", str(source), "--out", str(tmp_path / "out")]) == 0
    written = tmp_path / "out" / "nccl_data_with_counters.json.gz"
    assert capsys.readouterr().out == f"{written}  rank 0: 9696 counter events\n"


def test_cli_bad_path_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "counters", "/no/such/trace"]) != 0
    assert "/no/such/trace: no such file or folder" in capsys.readouterr().err


def _launch_changes_by_definition(frame: RankFrame) -> tuple[list[int], list[int], list[int]]:
    """`launch_changes` one row at a time, as HTA's TraceCounters reads it: a launch (with
    `index_correlation > 0`) +1 per GPU op with its correlation (op -1 when it has none), a GPU
    op with such a launch's correlation -1."""
    ops: dict[int, list[int]] = {}
    for row in np.flatnonzero(frame.stream != -1).tolist():
        ops.setdefault(int(frame.correlation[row]), []).append(row)
    runtime = [
        r
        for r in np.flatnonzero(frame.name_in(RUNTIME_LAUNCHES)).tolist()
        if frame.index_correlation[r] > 0
    ]
    launched = {int(frame.correlation[r]) for r in runtime}
    changes = [(r, op, 1) for r in runtime for op in ops.get(int(frame.correlation[r]), [-1])]
    changes += [
        (r, r, -1)
        for r in np.flatnonzero(frame.stream != -1).tolist()
        if int(frame.correlation[r]) in launched
    ]
    return [c[0] for c in changes], [c[1] for c in changes], [c[2] for c in changes]


@pytest.mark.parametrize(
    "trace_dir",
    [*MAIN_TRACES, DATA / "edge_cases" / "trace_file_list_inference_rank_1"],
    ids=lambda p: p.name,
)
def test_launch_changes_are_hta_s_change_points(trace_dir: Path) -> None:
    for frame in trace_set(trace_dir, hta_compatible=True).frames():
        rows, ops, delta = launch_changes(frame)
        assert (rows.tolist(), ops.tolist(), delta.tolist()) == _launch_changes_by_definition(frame)


def test_a_launch_of_several_kernels_counts_once_per_kernel_as_hta_does(tmp_path: Path) -> None:
    # HTA 0.5.0's generate_trace_with_counters() on the same file (pandas 2.3.3), summarised as
    # _summary does: its queue tracks join a launch to every GPU op with its correlation.
    hta = {
        "Queue Length|7": {"events": 182, "sum": 169.0, "first_ts": 1694039994071256,
                           "last": 0.0, "last_ts": 1694040010096876, "pid": 0},
        "Queue Length|20": {"events": 14, "sum": 7.0, "first_ts": 1694039996493371,
                            "last": 0.0, "last_ts": 1694040010077128, "pid": 0},
        "Memcpy BW|Memcpy HtoD": {"events": 32, "sum": 77.176, "first_ts": 1694039994071305.0,
                                  "last": 0.0, "last_ts": 1694039994134447.0, "pid": 0},
        "Memcpy BW|Memset": {"events": 6, "sum": 5.116, "first_ts": 1694039996493417.0,
                             "last": 0.0, "last_ts": 1694040010096774.0, "pid": 0},
    }  # fmt: skip
    trace = load_trace_set(graph_launch(tmp_path / "graph", in_window=False), hta_compatible=True)
    events = counter_events(trace.ranks[0], trace.origin_us)
    assert _summary(events) == hta
    queue = [v for e in events for k, v in e["args"].items() if k == "Queue Length"]
    assert min(queue) == 0  # one +1 per kernel: never below zero


def test_a_launch_without_a_link_is_not_counted_as_hta_does() -> None:
    # HTA 0.5.0's generate_trace_with_counters() on this trace (bench/hta_api_goldens.py's
    # counters, pandas 2.3.3): its runtime-launch query keeps only launches with
    # index_correlation > 0. Counting the others too gave 8 events, summing to 4.
    trace = trace_set(DATA / "edge_cases" / "trace_file_list_inference_rank_1", hta_compatible=True)
    frame = next(iter(trace.frames()))
    assert _summary(counter_events(frame, trace.origin_us)) == {
        "Queue Length|7": {"events": 6, "sum": 3.0, "first_ts": 1665536373730516.0,
                           "last": 0.0, "last_ts": 1665536373730701.0, "pid": 0},
    }  # fmt: skip
