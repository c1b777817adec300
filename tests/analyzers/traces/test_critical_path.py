"""The critical path agrees with HTA 0.5.0's `critical_path_analysis(rank, "ProfilerStep", 0)`.

References: tests/data/traces/*/hta-0.5.0/critical_path.json, written by bench/hta_api_goldens.py
in HTA's own environment (pandas 2.3). Where HTA answers, the graph (nodes, edges), the path
(length, edge count) and its time per `bound_by` label are equal; where HTA raises (2021-format
traces: no runtime node for a launch) or finds no annotation, HTA mode says so in a note.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from analyzers.traces.analyses.base import TraceOptions
from analyzers.traces.analyses.critical_path import (
    BOUND_BY,
    KERNEL_KERNEL,
    LAUNCH,
    CriticalPath,
    CriticalPathError,
    critical_path,
    critical_path_of,
)
from analyzers.traces.analyses.replay import Change, Replay
from analyzers.traces.analyses.whatif import saving_bound_us
from analyzers.traces.api import load_trace_set
from tests.analyzers.traces.trace_paths import DATA, MAIN_TRACES, graph_launch, trace_set

# HTA's answer there depends on event-record syncs (`Event Sync` after `cudaEventRecord`), whose
# `wait_on_cuda_event_record_corr_id` the loader does not keep (critical_path.py docstring).
NOT_REPRODUCED = {"critical_path_cuda_event_sync"}
GOLDEN_TRACES = [
    p
    for p in [*MAIN_TRACES, DATA / "edge_cases" / "critical_path_simple_add"]
    if (p / "hta-0.5.0" / "critical_path.json").is_file()
]


def _golden(trace_dir: Path) -> dict[str, dict[str, object]]:
    ranks: dict[str, dict[str, object]] = json.loads(
        (trace_dir / "hta-0.5.0" / "critical_path.json").read_text()
    )["ranks"]
    return ranks


def test_every_shared_trace_has_a_golden() -> None:
    assert [p.name for p in GOLDEN_TRACES if p in MAIN_TRACES] == [p.name for p in MAIN_TRACES]


@pytest.mark.parametrize("trace_dir", GOLDEN_TRACES, ids=lambda p: p.name)
def test_agrees_with_hta(trace_dir: Path) -> None:
    trace = trace_set(trace_dir, hta_compatible=True)
    for frame in trace.frames():
        expected = _golden(trace_dir)[str(frame.rank)]
        error = expected.get("error")
        if isinstance(error, str) and error.startswith("AssertionError"):
            with pytest.raises(CriticalPathError, match="no runtime node"):
                critical_path_of(frame, native=False)
            continue
        path = critical_path_of(frame, native=False)
        if error == "no ProfilerStep annotation":
            assert path is None
            continue
        assert path is not None
        assert (path.nodes, path.edges) == (expected["nodes"], expected["edges"])
        assert (path.length_us, len(path.rows)) == (expected["length_us"], expected["path_edges"])
        assert _bound_by_us(path) == expected["bound_by_us"]


def test_hta_mode_says_why_there_is_no_path() -> None:
    result = critical_path(
        trace_set(DATA / "kineto_resnet50_nw0", hta_compatible=True), TraceOptions()
    )
    assert result.per_rank == {}
    assert len(result.notes) == 1
    assert result.notes[0].startswith("rank 0: no critical path (no runtime node for the launch")


def test_native_mode_reads_2021_traces_over_every_step() -> None:
    """Native mode reads `Operator`/`Runtime` rows (HTA finds no CPU node there) and spans every
    ProfilerStep: the path is as long as the steps, and its shares add up to 100 %."""
    trace = trace_set(DATA / "kineto_resnet50_nw0")
    result = critical_path(trace, TraceOptions())
    values = result.per_rank[0]
    frame = trace.ranks[0]
    path = critical_path_of(frame, native=True)
    assert path is not None
    start, end = path.window
    assert 0 < values["length_us"] <= end - start
    summary = result.table("critical_path_summary").records()
    assert sum(r["share_pct"] for r in summary) == pytest.approx(100.0)
    assert values["cpu_bound_us"] > 0 and values["gpu_compute_bound_us"] > 0


def test_whatif_saves_nothing_off_the_critical_path() -> None:
    """ResNet-50 with 0 workers waits on its data loader: the GPU is off the critical path, so
    even AMP's most optimistic kernel speed-ups save nothing (the replay alone priced them at
    1.4 % of the step); the data-loader wait is on it and its removal still saves."""
    from analyzers.traces.api import run_analyses

    trace = trace_set(DATA / "kineto_resnet50_nw0")
    rows = {
        r["scenario"]: r
        for r in run_analyses(trace, names=["whatif"])["whatif"].table("whatif").records()
    }
    assert rows["amp"]["saved_high"] == 0.0  # the optimistic end: not a step shorter
    assert rows["no_dataloader_wait"]["saved_fraction"] > 0.3


def test_a_cpu_warp_that_the_longest_path_edge_misses_still_has_no_bound() -> None:
    """The bound tries the path's longest edge first; a warp of one short CPU edge after it
    leaves that edge as it was, and the check over every edge still finds the warp."""
    frame = trace_set(DATA / "kineto_resnet50_nw0").ranks[0]
    replay = Replay(frame, TraceOptions())
    path = critical_path_of(frame, native=True)
    assert path is not None
    span = path.end_us - path.begin_us
    longest = int(np.argmax(span))
    short = int(np.flatnonzero((span > 1.0) & (path.begin_us >= path.end_us[longest]))[0])
    edge = slice(short, short + 1)
    warp = Change(cpu_warp=(path.begin_us[edge], path.end_us[edge], np.array([0.5])))
    assert saving_bound_us(path, replay, warp) == math.inf
    assert saving_bound_us(path, replay, Change(gpu_factor=np.ones(len(replay.gpu)))) == 0.0


def test_a_latency_cap_saves_at_most_what_the_paths_launch_and_kernel_gaps_exceed_it() -> None:
    """CUDA graphs' bound: every launch and kernel-to-kernel gap on the critical path shrinks to
    the cap, and nothing else on it; per step. A cap above every gap saves nothing."""
    frame = trace_set(DATA / "kineto_resnet50_nw0").ranks[0]
    replay = Replay(frame, TraceOptions())
    path = critical_path_of(frame, native=True)
    assert path is not None
    gaps = path.weights[(path.kinds == LAUNCH) | (path.kinds == KERNEL_KERNEL)]
    over_cap = np.maximum(0.0, gaps - 2.0).sum() / replay.n_steps
    assert over_cap > 0
    assert saving_bound_us(path, replay, Change(latency_cap_us=2.0)) == pytest.approx(over_cap)
    assert saving_bound_us(path, replay, Change(latency_cap_us=float(gaps.max()))) == 0.0


def test_the_call_stack_walk_enters_and_leaves_each_call_in_depth_first_order() -> None:
    """a( b() c( d() ) ) then e, an end on the empty stack ignored, e never ended: a walk enters
    a, b, leaves b, enters c, d, leaves d, c, a, enters e and leaves it at the end."""
    from analyzers.traces import _kineto_columns as c

    starts = np.array([1, 1, 0, 1, 1, 0, 0, 0, 0, 1], dtype=bool)  # a b ) c d ) ) ) ) e
    n = 5
    expected_walk = [0, 1, n + 1, 2, 3, n + 3, n + 2, n + 0, 4, n + 4]
    walk, parent = (np.frombuffer(a, np.int64) for a in c.stack_walk(starts.view(np.uint8)))
    assert (walk.tolist(), parent.tolist()) == (expected_walk, [-1, 0, 0, 2, -1])


def test_parallel_edges_keep_the_first_place_and_the_last_edge() -> None:
    """networkx keeps one edge per pair, where it was first added, with the last one's data:
    edges 0 (0->1, 0), 1 (1->2, 1), 2 (0->1 again), 3 (0->2, 2), 4 (1->2 again, 1), 5 (0->1 a
    third time, 1). 0->1->2 weighs 2 with the last weights (0 with the first ones) and ties
    0->2, whose pair was added after 1->2: the path is the pairs' last edges 5 and 4."""
    from analyzers.traces._kineto_columns import longest_path

    src, dst = np.array([0, 1, 0, 0, 1, 0], np.int64), np.array([1, 2, 1, 2, 2, 1], np.int64)
    found = longest_path(3, src, dst, np.array([0.0, 1.0, 0.0, 2.0, 1.0, 1.0]))
    assert found is not None
    assert (np.frombuffer(found[0], np.int64).tolist(), found[1]) == ([5, 4], 3)


def test_the_longest_path_refuses_a_cycle_and_takes_the_first_longest_path() -> None:
    from analyzers.traces._kineto_columns import longest_path

    src, dst = np.array([0, 1, 2], dtype=np.int64), np.array([1, 2, 1], dtype=np.int64)
    assert longest_path(3, src, dst, np.ones(3)) is None
    # 0 -> 1 -> 3 and 0 -> 2 -> 3 tie at 2; node 3's first predecessor in edge order wins.
    src, dst = np.array([0, 0, 2, 1], dtype=np.int64), np.array([1, 2, 3, 3], dtype=np.int64)
    found = longest_path(4, src, dst, np.ones(4))
    assert found is not None and np.frombuffer(found[0], dtype=np.int64).tolist() == [1, 2]


def test_a_launch_of_two_kernels_before_the_window_leaves_the_path_as_hta_finds_it(
    tmp_path: Path,
) -> None:
    # HTA 0.5.0 on that file (bench/hta_api_goldens.py's critical_path, pandas 2.3.3): its
    # queue lengths count the launch once per kernel, so the stream's queue is 0 again after
    # both. Counted once, the queue stayed one below for the rest of the stream, and every
    # launch in the window was judged a kernel-kernel wait or none: the path was all CPU.
    trace = load_trace_set(graph_launch(tmp_path / "t", in_window=False), hta_compatible=True)
    path = critical_path_of(trace.ranks[0], native=False)
    assert path is not None
    assert (path.nodes, path.edges, path.length_us, len(path.rows)) == (436, 437, 294696.0, 336)
    assert _bound_by_us(path) == _SIMPLE_ADD_STEP_BOUND_BY_US


def test_a_launch_of_two_kernels_in_the_window_has_a_path_in_native_mode_only(
    tmp_path: Path,
) -> None:
    # HTA 0.5.0 raises there ("ValueError: Graph is not valid"): its kernel table joins the
    # queue series on the launch's row, which holds two changes, so the kernel is read twice and
    # the second time is linked after its own end, a cycle.
    folder = graph_launch(tmp_path / "t", in_window=True)
    hta = critical_path(load_trace_set(folder, hta_compatible=True), TraceOptions())
    assert hta.per_rank == {}
    assert hta.notes == (
        "rank 0: no critical path (a launch of several GPU ops (a CUDA graph) in the window; "
        "HTA 0.5.0 raises too)",
    )
    # Native mode reads the launch's queue length after its first kernel (1 here, as a launch of
    # one kernel would); the second kernel, which no CPU row points at, is not in the graph (nor
    # in HTA's).
    native = critical_path_of(load_trace_set(folder).ranks[0], native=True)
    assert native is not None
    assert (native.nodes, native.edges, native.length_us) == (432, 431, 294696.0)
    assert _bound_by_us(native) == _SIMPLE_ADD_STEP_BOUND_BY_US


# HTA 0.5.0's critical path of critical_path_simple_add's measured forward pass (as ProfilerStep)
# with no launch changed, and with one launch of two kernels before the window.
_SIMPLE_ADD_STEP_BOUND_BY_US = {
    "cpu_bound": 294162.0,
    "gpu_compute_bound": 508.0,
    "gpu_kernel_kernel_overhead": 9.0,
    "gpu_kernel_launch_overhead": 17.0,
}


def _bound_by_us(path: CriticalPath) -> dict[str, float]:
    labels = np.array([*BOUND_BY, ""], dtype=object)[path.label]  # "": no time
    ours = {b: float(path.weights[labels == b].sum()) for b in set(labels) if b}
    return {b: us for b, us in ours.items() if us}
