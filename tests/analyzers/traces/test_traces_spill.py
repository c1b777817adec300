"""A large multi-rank set keeps its frames in files, one rank mapped at a time (spill.py, issue
29: peak memory grows with the largest rank, not the set), and nothing it reports changes.

Given the real NCCL trace as a 3-rank set (straggler_set.py), spilled at any size
(`spill_over_bytes=0`), every analysis, finding, the JSON and table reports and the stored
document equal those of the set held in memory, in both modes."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from analyzers.traces.analyses.base import TraceOptions
from analyzers.traces.api import TraceReport, load_trace_set, run_analyses
from analyzers.traces.document import analysis_document
from analyzers.traces.findings import trace_findings
from analyzers.traces.render import render_text, report_json
from analyzers.traces.spill import SpilledFrames
from tests.analyzers.traces.straggler_set import build


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("ranks"))


def _report(
    path: Path, hta_compatible: bool, spill_over_bytes: int, workers: int = 1
) -> TraceReport:
    options = TraceOptions()
    trace = load_trace_set(
        path,
        hta_compatible=hta_compatible,
        spill_over_bytes=spill_over_bytes,
        rank_workers=workers,
    )
    results = run_analyses(trace, options, workers=workers)
    return TraceReport(trace, results, trace_findings(trace, results, options))


@pytest.mark.parametrize("hta_compatible", [False, True])
def test_a_spilled_set_reports_exactly_what_the_set_in_memory_reports(
    three_ranks: Path, hta_compatible: bool
) -> None:
    held = _report(three_ranks, hta_compatible, spill_over_bytes=1 << 62)
    spilled = _report(three_ranks, hta_compatible, spill_over_bytes=0)
    assert isinstance(held.trace.ranks, dict)
    assert isinstance(spilled.trace.ranks, SpilledFrames)
    assert report_json([spilled]) == report_json([held])
    assert render_text(spilled) == render_text(held)
    assert analysis_document(spilled) == analysis_document(held)


@pytest.mark.parametrize("hta_compatible", [False, True])
@pytest.mark.parametrize("spill_over_bytes", [0, 1 << 62], ids=["spilled", "held"])
def test_workers_make_the_report_one_process_makes(
    three_ranks: Path, hta_compatible: bool, spill_over_bytes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files read and framed by rank worker processes (their frames sent back), and analyses run
    by forked workers (their results sent back), make the report one process makes, byte for
    byte."""
    import analyzers.traces.api

    monkeypatch.setattr(analyzers.traces.api, "WORKERS_OVER_ROWS", 0)  # a set of any size
    monkeypatch.setattr(analyzers.traces.api, "WORKERS_OVER_BYTES", 0)
    one = _report(three_ranks, hta_compatible, spill_over_bytes)
    workers = _report(three_ranks, hta_compatible, spill_over_bytes, workers=3)
    assert [f.rank for f in workers.trace.frames()] == [0, 1, 2]
    assert report_json([workers]) == report_json([one])
    assert analysis_document(workers) == analysis_document(one)


def test_a_small_set_is_read_and_analyzed_in_this_process(
    three_ranks: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under `WORKERS_OVER_BYTES` of files and `WORKERS_OVER_ROWS` events, asking for workers
    starts no process: the set is held in memory, where workers would add to the peak."""
    import concurrent.futures

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("a worker pool was started")

    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", no_pool)
    one = _report(three_ranks, True, 1 << 62)
    asked = _report(three_ranks, True, 1 << 62, workers=3)
    assert report_json([asked]) == report_json([one])


def test_a_spilled_set_maps_one_rank_at_a_time(three_ranks: Path) -> None:
    trace = load_trace_set(three_ranks, spill_over_bytes=0)
    frames = trace.ranks
    first = frames[0]
    assert not first.ts.flags.writeable  # a map of the file, not a copy
    assert frames[0] is first  # the rank last read stays mapped
    second = frames[1]
    assert frames[0] is not first  # reading rank 1 let rank 0's maps go
    np.testing.assert_array_equal(frames[1].ts, second.ts)
    assert [f.rank for f in trace.frames()] == [0, 1, 2]


def test_the_spilled_files_go_with_the_set(three_ranks: Path) -> None:
    frames = SpilledFrames()
    trace = load_trace_set(three_ranks, spill_over_bytes=0)
    frames[0] = trace.ranks[0]
    folder = frames._folder
    assert any(folder.rglob("*.npy"))
    del frames  # the set's last reference: its finalizer removes the folder
    gc.collect()
    assert not folder.exists()


def test_a_killed_runs_files_are_removed_by_the_next_set(tmp_path: Path) -> None:
    """A run killed with SIGKILL leaves its folder (no finalizer runs); the next spilled set
    removes the folders whose owning process is gone, and no other."""
    import os
    import signal
    import subprocess
    import sys

    script = (
        "import sys; from pathlib import Path; from analyzers.traces.spill import SpilledFrames; "
        "s = SpilledFrames(Path(sys.argv[1])); print(s._folder, flush=True); sys.stdin.read()"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script, str(tmp_path)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    ) as child:  # fmt: skip
        assert child.stdout is not None
        killed = Path(child.stdout.readline().strip())
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    assert killed.is_dir()
    live = SpilledFrames(tmp_path)
    other = tmp_path / "fleetscope-ranks-notapid"
    other.mkdir()
    assert not killed.exists()
    SpilledFrames(tmp_path)
    assert live._folder.is_dir() and other.is_dir()
