"""The bounded run of bench/fuzz_traces.py: mutated Kineto text through the loader's C pass and
its fallbacks loads or raises a TraceError, never crashes (a crash would take this test process
with it); one trace bomb of each kind (issue 28) is refused with its own error."""

from __future__ import annotations

import random
from pathlib import Path

from analyzers.traces.load import load_raw_trace
from bench.fuzz_traces import BOMBS, mutate, run, seed_texts

TRACES = Path(__file__).resolve().parents[2] / "data" / "traces"


def test_mutated_trace_text_loads_or_raises_and_never_crashes(tmp_path: Path) -> None:
    seeds = seed_texts(p for p in sorted(TRACES.iterdir()) if p.is_dir() and p.name != "edge_cases")
    assert len(seeds) == 7
    whole = min(seeds, key=len)  # minitoy, under the seed cut: the unmutated text loads
    (tmp_path / "case.json").write_bytes(whole)
    assert load_raw_trace(tmp_path / "case.json").rank == 0
    loaded, refused = run(seeds, 400, seed=20261124, work=tmp_path, bomb_cases=len(BOMBS))
    assert loaded + refused == 400


def test_mutations_are_reproducible_from_the_seed() -> None:
    text = b'{"traceEvents": [{"ph": "X", "ts": 1, "dur": 2}]}'
    first = [mutate(random.Random(7), text) for _ in range(3)]
    assert first == [mutate(random.Random(7), text) for _ in range(3)]
