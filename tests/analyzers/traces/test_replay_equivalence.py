"""The array replay is the event-by-event model it replaced: for every scenario at every level of
its assumptions, on real traces, `Replay.step_time` equals a plain loop over the launches and
syncs in time order (the model as `replay.py`'s docstring states it) up to float rounding. The
array helpers it rests on (`outermost`, `grouped_cummax`) equal their loops exactly."""

from __future__ import annotations

import bisect
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzers.traces.analyses.base import TraceOptions
from analyzers.traces.analyses.replay import Change, Replay, grouped_cummax, outermost
from analyzers.traces.analyses.whatif import (
    LEVELS,
    SCENARIOS,
    _kernel_kind,
)
from tests.analyzers.traces.trace_paths import ALL_TRACES, DATA, trace_set

CPU_PAIR = Path(__file__).resolve().parents[2] / "data" / "whatif_pairs" / "cpu_cnn" / "base"


def reference_step_time(replay: Replay, change: Change) -> float:
    """The replay one event at a time: the CPU clock warped per event, each launch's kernel
    after max(launch + latency, its stream's previous op), each sync waiting for all GPU work
    launched before it."""
    o = replay.options
    if replay.n_steps == 0:
        return math.nan
    w_start: list[float] = []
    w_end: list[float] = []
    w_fac: list[float] = []
    if change.cpu_warp is not None:
        w_start, w_end = change.cpu_warp[0].tolist(), change.cpu_warp[1].tolist()
        w_fac = change.cpu_warp[2].tolist()
    w_cum = [0.0]
    for a, b, f in zip(w_start, w_end, w_fac, strict=True):
        w_cum.append(w_cum[-1] + (b - a) * (f - 1.0))
    scale = change.cpu_scale

    def clock(t: float) -> float:
        k = bisect.bisect_right(w_start, t)
        added = 0.0
        if k:
            added = w_cum[k - 1] + (min(t, w_end[k - 1]) - w_start[k - 1]) * (w_fac[k - 1] - 1.0)
        return replay.start + (t + added - replay.start) * scale

    points = [(t, 0, i) for i, t in enumerate(replay.launch_ts.tolist())]
    points += [(t, 1, i) for i, t in enumerate(replay.sync_ts.tolist())]
    points.sort()
    factor = change.gpu_factor.tolist() if change.gpu_factor is not None else None
    shift, gpu_done, last_gpu_end = 0.0, -math.inf, -math.inf
    stream_free: dict[int, float] = {}
    for t, kind, i in points:
        new_t = clock(t) + shift
        if kind == 0:
            dur = float(replay.gpu_dur[i]) * (factor[i] if factor is not None else 1.0)
            if change.pinned and replay.gpu_pageable[i]:
                dur /= o.pinned_copy_speedup
                shift -= max(0.0, float(replay.launch_dur[i]) - o.sync_overhead_us) * scale
            stream = int(replay.gpu_stream[i])
            start = new_t + min(float(replay.latency[i]), change.latency_cap_us)
            end = max(start, stream_free.get(stream, -math.inf)) + dur
            stream_free[stream] = end
            gpu_done = max(gpu_done, end)
            if t < replay.end:
                last_gpu_end = max(last_gpu_end, end)
        else:
            d = float(replay.sync_dur[i])
            overhead = min(d, o.sync_overhead_us)
            waited = max(overhead, gpu_done - new_t)
            shift += (overhead if change.sync_costs_overhead else waited) - d * scale
    cpu_end = clock(replay.end) + shift
    return (max(cpu_end, last_gpu_end) - clock(replay.start)) / replay.n_steps


CASES = [(p, TraceOptions()) for p in [*ALL_TRACES, CPU_PAIR]] + [
    (DATA / "kineto_resnet50_nw4", TraceOptions(dataloader_workers=2, host_cores=2)),
    (CPU_PAIR, TraceOptions(dataloader_workers=2, host_cores=2, pinned_copy_speedup=3.0)),
]


@pytest.mark.parametrize(
    ("trace_dir", "options"), CASES, ids=[f"{p.name}-{i}" for i, (p, _) in enumerate(CASES)]
)
def test_every_scenario_replays_as_the_event_loop(trace_dir: Path, options: TraceOptions) -> None:
    for frame in trace_set(trace_dir).frames():
        replay = Replay(frame, options)
        changes = [Change(), Change(sync_costs_overhead=True), Change(pinned=True)]
        for spec in SCENARIOS.values():
            changes += [c for level in LEVELS if (c := spec.fn(replay, options, level))]
        for change in changes:
            want = reference_step_time(replay, change)
            got = replay.step_time(change)
            assert got == pytest.approx(want, rel=1e-9, nan_ok=True), (frame.rank, change)


def test_a_repeated_change_is_replayed_once() -> None:
    """Scenarios whose levels agree (no_sync, pinned_copies) or that share a change reuse the
    replay: same content, same answer, one computation."""
    replay = Replay(trace_set(DATA / "kineto_resnet50_nw0").ranks[0], TraceOptions())
    first = replay.step_time(Change(pinned=True))
    calls = 0
    original = replay._step_time

    def counting(change: Change) -> float:
        nonlocal calls
        calls += 1
        return original(change)

    replay._step_time = counting  # type: ignore[method-assign]
    assert replay.step_time(Change(pinned=True)) == first
    assert calls == 0
    replay.step_time(Change(pinned=True, cpu_scale=1.5))
    assert calls == 1


def loop_outermost(start: list[float], end: list[float]) -> tuple[list[float], list[float]]:
    keep_s: list[float] = []
    keep_e: list[float] = []
    for s, e in sorted(zip(start, end, strict=True), key=lambda p: (p[0], -p[1])):
        if keep_e and s < keep_e[-1]:
            keep_e[-1] = max(keep_e[-1], e)
            continue
        keep_s.append(s)
        keep_e.append(e)
    return keep_s, keep_e


intervals = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 15)), max_size=30).map(
    lambda rows: ([float(s) for s, _ in rows], [float(s + d) for s, d in rows])
)


@given(intervals)
def test_outermost_is_the_merge_loop(rows: tuple[list[float], list[float]]) -> None:
    s, e = outermost(np.array(rows[0], dtype=np.float64), np.array(rows[1], dtype=np.float64))
    assert (s.tolist(), e.tolist()) == loop_outermost(*rows)


@given(st.lists(st.tuples(st.integers(0, 3), st.floats(-1e6, 1e6)), max_size=40))
def test_grouped_cummax_restarts_at_each_group(rows: list[tuple[int, float]]) -> None:
    rows = sorted(rows, key=lambda r: r[0])
    group = np.array([g for g, _ in rows], dtype=np.int64)
    values = np.array([v for _, v in rows], dtype=np.float64)
    want: list[float] = []
    for i, (g, v) in enumerate(rows):
        want.append(v if i == 0 or rows[i - 1][0] != g else max(want[-1], v))
    assert grouped_cummax(values, group).tolist() == want


_GEMM_WORDS = ("gemm", "conv", "winograd", "scudnn", "dgrad", "wgrad")
_MEMBOUND_WORDS = (
    "elementwise", "bn_", "batchnorm", "batch_norm", "pool", "reduce", "softmax", "relu",
    "add", "mul", "clamp", "threshold", "layernorm", "layer_norm",
)  # fmt: skip


def _word_kind(name: str) -> int:
    """AMP's kernel kind of an ASCII name as words say it, case-insensitive (what the regexes
    scenarios.GEMM_KERNELS and MEMBOUND_KERNELS mean): GEMM/conv (1, also `cudnn` followed by
    `fprop` on one line), else memory-bound (2), else neither (0)."""
    low = name.lower()
    fprop = any(
        "fprop" in line[line.find("cudnn") :] for line in low.split("\n") if "cudnn" in line
    )
    if fprop or any(w in low for w in _GEMM_WORDS):
        return 1
    return 2 if any(w in low for w in _MEMBOUND_WORDS) else 0


_kernel_text = st.text(alphabet=st.sampled_from(list("abcdgmnoprsuwlzCDGMNOPRUW_ \n")), max_size=40)


@given(
    words=st.lists(
        st.one_of(
            _kernel_text,
            st.sampled_from(
                ["cuDNN", "FPROP", "Gemm", "CONV", "batch_Norm", "LAYERNORM", "bn_", "ADD",
                 "scudnn", "winograd", "\n", "fprop", "cudnn", "wgrad", "Threshold"]
            ),
        ),
        max_size=6,
    )
)  # fmt: skip
def test_amp_kernel_kinds_are_what_the_words_say(words: list[str]) -> None:
    name = "".join(words)
    assert _kernel_kind(name) == _word_kind(name), name


def test_amp_kernel_kinds_of_the_golden_kernels_are_what_the_words_say() -> None:
    names = {n for d in ALL_TRACES for f in trace_set(d).frames() for n in f.names if n.isascii()}
    assert len(names) > 1000
    assert [_kernel_kind(n) for n in sorted(names)] == [_word_kind(n) for n in sorted(names)]
