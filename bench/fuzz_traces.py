"""Mutation fuzzing of the trace loader, whose fast path is C (analyzers/traces/_kineto_columns.c).

    .venv/bin/python -m bench.fuzz_traces --cases 20000      # the long run (make fuzz)
    tests/analyzers/traces/test_traces_fuzz.py              # the bounded run in make test

bench/fuzz.py mutates whole gzip uploads, so nearly every case stops at the gzip check; this one
mutates the JSON text the C pass reads. Seeds are the first 300 KB of real traces under
tests/data/traces (the shared sample traces; `--traces` for others). Each case applies
1-6 mutations: a byte overwritten, a JSON token inserted (quotes, escapes, a lone surrogate,
numbers past int64 and float range, NaN, nesting, the keys the pass reads), a range deleted, a
slice duplicated, a cut. A case passes when `load_raw_trace` returns or raises; the run is a child
process, so a crash (a signal) is reported with the seed and case number, and its input is kept
in --crashes for replay.
"""

from __future__ import annotations

import argparse
import gzip
import random
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEED_BYTES = 300_000
TOKENS = (
    b'"', b"\\", b"\\u", b"\\ud800", b"{", b"}", b"[", b"]", b",", b":", b"-", b"1e999", b"0.",
    b"null", b"true", b"9223372036854775808", b"-9223372036854775809",
    b"1.7976931348623157e309", b"\x00", b"\xff", b"\xed\xa0\x80", b'"ts":', b'"dur":',
    b'"args":{', b'"correlation":', b'"stream":', b"}},", b"NaN", b"Infinity", b"1" * 400,
)  # fmt: skip


def seed_texts(folders: Iterable[Path]) -> list[bytes]:
    """The decompressed head of each trace file found (one per folder)."""
    texts = []
    for folder in folders:
        for path in sorted(folder.glob("*.json*"))[:1]:
            raw = path.read_bytes()
            text = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
            texts.append(text[:SEED_BYTES])
    return texts


def mutate(rng: random.Random, seed: bytes) -> bytes:
    data = bytearray(seed)
    for _ in range(rng.randint(1, 6)):
        if not data:
            break
        at, op = rng.randrange(len(data)), rng.random()
        if op < 0.3:
            data[at] = rng.randrange(256)
        elif op < 0.55:
            data[at:at] = rng.choice(TOKENS)
        elif op < 0.75:
            del data[at : at + rng.randint(1, 64)]
        elif op < 0.9:
            src = rng.randrange(len(data))
            data[at:at] = data[src : src + rng.randint(1, 200)]
        else:
            del data[at:]
    return bytes(data)


def run(seeds: list[bytes], cases: int, seed: int, work: Path) -> tuple[int, int]:
    """Load `cases` mutations in this process; (loaded, refused). The input of the case running
    is in work/case.json, so a crash leaves it behind."""
    from analyzers.traces.load import load_raw_trace

    rng = random.Random(seed)
    path, loaded = work / "case.json", 0
    for _ in range(cases):
        path.write_bytes(mutate(rng, rng.choice(seeds)))
        try:
            load_raw_trace(path)
            loaded += 1
        except Exception:  # a clear error is a pass: only a crash fails
            pass
    return loaded, cases - loaded


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--traces", type=Path, default=ROOT / "tests" / "data" / "traces")
    parser.add_argument("--crashes", type=Path, default=Path("var/fuzz-crashes"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    folders = [p for p in sorted(args.traces.glob("*")) if p.is_dir() and p.name != "edge_cases"]
    seeds = seed_texts(folders)
    if not seeds:
        parser.error(f"no trace files under {args.traces}")
    args.crashes.mkdir(parents=True, exist_ok=True)
    if args.child:
        loaded, refused = run(seeds, args.cases, args.seed, args.crashes)
        print(f"seed {args.seed}: {args.cases} cases, {loaded} loaded, {refused} refused, no crash")
        return 0
    child = subprocess.run(
        [sys.executable, "-m", "bench.fuzz_traces", "--child", *(argv or sys.argv[1:])], cwd=ROOT
    )
    if child.returncode < 0:
        kept = args.crashes / f"trace-crash-seed{args.seed}.json"
        (args.crashes / "case.json").rename(kept)
        print(f"seed {args.seed}: the loader crashed (signal {-child.returncode}); input: {kept}")
        return 1
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
