"""A multi-rank set is prepared rank by rank (issue 29, "at any size, in bounded memory"): each
file's raw columns are reduced to its rank's frame and released before the next file is read, so
the loader adds one rank to the peak, not the set; and the set prepared that way is exactly the
one prepared from all files held at once.

Given the real NCCL trace as a 3-rank set (straggler_set.py), the tests watch each `RawTrace`
through a weak reference while the next file loads."""

from __future__ import annotations

import weakref
from pathlib import Path

import numpy as np
import pytest

from analyzers.traces.api import find_trace_files, load_trace_set
from analyzers.traces.frame import TraceSet
from analyzers.traces.load import RawTrace, load_raw_trace
from tests.analyzers.traces.straggler_set import build

COLUMNS = ("index", "cat", "name", "pid", "tid", "ts", "dur", "stream", "correlation",
           "memory_bw_gbps", "blocks_per_sm", "bytes", "external_id", "index_correlation",
           "mem_ts", "mem_device_type", "mem_total_allocated")  # fmt: skip


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("ranks"))


@pytest.mark.parametrize("hta_compatible", [False, True])
def test_each_file_is_released_before_the_next_is_read(
    three_ranks: Path, hta_compatible: bool
) -> None:
    loaded: list[weakref.ref[RawTrace]] = []
    alive_at_load: list[int] = []

    def load(path: Path) -> RawTrace:
        alive_at_load.append(sum(ref() is not None for ref in loaded))
        raw = load_raw_trace(path)
        loaded.append(weakref.ref(raw))
        return raw

    trace = load_trace_set(three_ranks, hta_compatible=hta_compatible, load=load)
    assert sorted(trace.ranks) == [0, 1, 2]
    assert alive_at_load == [0, 0, 0]
    assert [ref() for ref in loaded] == [None, None, None]


def _same(a: TraceSet, b: TraceSet) -> None:
    assert (a.mode, a.source, a.origin_us, a.notes) == (b.mode, b.source, b.origin_us, b.notes)
    assert list(a.ranks) == list(b.ranks)
    for rank, fa in a.ranks.items():
        fb = b.ranks[rank]
        assert (fa.path, fa.names, fa.ts_int) == (fb.path, fb.names, fb.ts_int)
        for column in COLUMNS:
            x, y = getattr(fa, column), getattr(fb, column)
            assert x.dtype == y.dtype, column
            np.testing.assert_array_equal(x, y, err_msg=column)


@pytest.mark.parametrize("hta_compatible", [False, True])
def test_rank_by_rank_prepares_the_same_set_as_all_files_at_once(
    three_ranks: Path, hta_compatible: bool
) -> None:
    held = [load_raw_trace(p) for p in find_trace_files(three_ranks)]
    at_once = load_trace_set(three_ranks, hta_compatible=hta_compatible, raws=held)
    by_rank = load_trace_set(three_ranks, hta_compatible=hta_compatible)
    _same(by_rank, at_once)
    # The held files are not changed by preparing a set from them.
    again = load_trace_set(three_ranks, hta_compatible=hta_compatible, raws=held)
    _same(again, at_once)
