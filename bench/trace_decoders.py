"""The trace loader's two decoders on a large multi-rank set (issue 29): the optional C column
pass (analyzers/traces/_kineto_columns.c) against msgspec's typed structs turned into columns
(analyzers/traces/load_fast.py with the C pass off), same files, same process, interleaved.

    .venv/bin/python -m bench.trace_decoders DIR [--reps 3]

DIR is a set from `bench.trace_sets` (plain JSON, so no inflate is timed). Each rep loads every
file once with each decoder (order alternating), timed by CPU time of the process
(`time.process_time`: the machine is shared, wall time would count other jobs); the best rep of
each is kept, and the columns of the two are checked equal. The rule (issue 29): the C pass stays
only if it is at least 2x faster than the best well-kept decoder (and fuzzed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from analyzers.traces import load_fast
from analyzers.traces.load import RawTrace, load_raw_trace

_C = load_fast._decode_columns
_COLUMN_FIELDS = ("index", "cat", "name", "pid", "tid", "ts", "dur", "stream", "correlation")


def _load_all(files: list[Path], c_pass: bool) -> tuple[float, list[RawTrace]]:
    load_fast._decode_columns = _C if c_pass else None
    try:
        t0 = time.process_time()
        raws = [load_raw_trace(f) for f in files]
        return time.process_time() - t0, raws
    finally:
        load_fast._decode_columns = _C


def _same(a: RawTrace, b: RawTrace) -> bool:
    return a.names == b.names and all(
        np.array_equal(getattr(a, f), getattr(b, f), equal_nan=f in ("ts", "dur"))
        for f in _COLUMN_FIELDS
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args(argv)
    if _C is None:
        raise SystemExit("the C pass is not built here (pip install -e . builds it)")
    files = sorted(p for p in args.folder.iterdir() if p.name.endswith((".json", ".gz")))
    size_mb = sum(p.stat().st_size for p in files) / 1e6
    best = {"c": float("inf"), "msgspec": float("inf")}
    for rep in range(args.reps):
        order = ("c", "msgspec") if rep % 2 == 0 else ("msgspec", "c")
        loaded = {}
        for name in order:
            seconds, raws = _load_all(files, c_pass=name == "c")
            best[name] = min(best[name], seconds)
            loaded[name] = raws
            print(f"rep {rep} {name:8s} {seconds:.2f} s CPU", flush=True)
        if rep == 0 and not all(
            _same(a, b) for a, b in zip(loaded["c"], loaded["msgspec"], strict=True)
        ):
            raise SystemExit("the two decoders gave different columns")
        del loaded
    ratio = best["msgspec"] / best["c"]
    print(
        f"| {args.folder.name} | {len(files)} | {size_mb:.0f} | {best['c']:.2f} | "
        f"{best['msgspec']:.2f} | {ratio:.2f}x | {size_mb / best['c']:.0f} | "
        f"{size_mb / best['msgspec']:.0f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
