"""Potential stragglers agree with HTA 0.5.0's `get_potential_stragglers()`.

HTA answers only on a set of several ranks with long NCCL kernels, and every shared real trace has
one rank; the reference set is built from the real NCCL trace by straggler_set.py (rank 2 arrives
1.5 ms late, the others wait for it inside their collectives). The golden,
hta_nccl_data_rank0/hta-0.5.0/stragglers_3_ranks.json, holds HTA's counts per rank and its
answer, written by `bench/hta_api_goldens.py --stragglers` in HTA's own environment.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzers.traces.api import load_trace_set, run_analyses
from tests.analyzers.traces.straggler_set import build
from tests.analyzers.traces.trace_paths import DATA, MAIN_TRACES, trace_set

GOLDEN = DATA / "hta_nccl_data_rank0" / "hta-0.5.0" / "stragglers_3_ranks.json"


@pytest.fixture(scope="module")
def three_ranks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("stragglers"))


def test_agrees_with_hta_on_three_ranks(three_ranks: Path) -> None:
    expected = json.loads(GOLDEN.read_text())
    trace = load_trace_set(three_ranks, hta_compatible=True)
    result = run_analyses(trace, names=["stragglers"])["stragglers"]
    counts = {
        str(r["rank"]): r["straggler_count"] for r in result.table("potential_stragglers").records()
    }
    assert counts == expected["counts"]
    named = [
        r["rank"]
        for r in result.table("potential_stragglers").records()
        if r["potential_straggler"]
    ]
    assert named == sorted(expected["stragglers"])
    assert result.notes == (f"potential stragglers: ranks {sorted(expected['stragglers'])}",)


@pytest.mark.parametrize("trace_dir", MAIN_TRACES, ids=lambda p: p.name)
def test_single_rank_traces_say_why_there_is_no_answer(trace_dir: Path) -> None:
    """HTA raises on each of these (no ncclKernel, or one rank, or no steps); we say why."""
    result = run_analyses(trace_set(trace_dir, hta_compatible=True), names=["stragglers"])
    notes = result["stragglers"].notes
    assert result["stragglers"].tables == ()
    assert len(notes) == 1 and notes[0].startswith("no straggler analysis: ")
