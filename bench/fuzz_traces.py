"""Mutation fuzzing of the trace loader, whose fast path is C (analyzers/traces/_kineto_columns.c).

    .venv/bin/python -m bench.fuzz_traces --cases 20000      # the long run (make fuzz)
    tests/analyzers/traces/test_traces_fuzz.py              # the bounded run in make test

bench/fuzz.py mutates whole gzip uploads, so nearly every case stops at the gzip check; this one
mutates the JSON text the C pass reads. Seeds are the first 300 KB of real traces under
tests/data/traces (the shared sample traces; `--traces` for others). Each case applies
1-6 mutations: a byte overwritten, a JSON token inserted (quotes, escapes, a lone surrogate,
numbers past int64 and float range, NaN, nesting, the keys the pass reads), a range deleted, a
slice duplicated, a cut. Every 10th case is a trace bomb instead (issue 28, `BOMBS`): an event's
`ts` or `dur` made NaN, an infinity or a number past float, a value nested thousands deep, a gzip
file of megabytes of spaces (in `make test` only the first of these kinds each run: a bomb costs
~0.2 s of inflate); each must be refused with its own error class. A mutation passes when
`load_raw_trace` returns or raises a TraceError (the clear one-line refusal); any other exception
fails the run, and a crash (a signal: the run is a child process) is reported with the seed and
case number, its input kept in --crashes for replay.
"""

from __future__ import annotations

import argparse
import gzip
import random
import re
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from fleetscope.errors import (
    NonFiniteTraceError,
    TraceBudgetError,
    TraceError,
    TraceNestingError,
)

ROOT = Path(__file__).resolve().parents[1]
SEED_BYTES = 300_000
TOKENS = (
    b'"', b"\\", b"\\u", b"\\ud800", b"{", b"}", b"[", b"]", b",", b":", b"-", b"1e999", b"0.",
    b"null", b"true", b"9223372036854775808", b"-9223372036854775809",
    b"1.7976931348623157e309", b"\x00", b"\xff", b"\xed\xa0\x80", b'"ts":', b'"dur":',
    b'"args":{', b'"correlation":', b'"stream":', b'"blocks per SM":', b"}},", b"NaN", b"Infinity",
    b"1" * 400,
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


# A complete event's time and duration as Kineto writes them (`"ph": "X"`, `cat` first).
_EVENT_TIME = re.compile(
    rb'"ph": ?"X", ?"cat": ?"[^"]*",[^{}]*?"ts": ?(-?[0-9.eE+]+), ?"dur": ?(-?[0-9.eE+]+)'
)
_NON_FINITE = (b"NaN", b"Infinity", b"-Infinity", b"1e999", b"-1.7976931348623157e309")


def non_finite(rng: random.Random, seed: bytes) -> bytes:
    """A kept event's `ts` or `dur` (of the first 2,000 complete events) made non-finite. Never
    the last event found: a seed cut short (the 300 KB seeds are) may end inside it, and then the
    file is truncated before it is non-finite."""
    matches = [m for m, _ in zip(_EVENT_TIME.finditer(seed), range(2001), strict=False)][:-1]
    if not matches:  # a seed written another way: one such event of its own
        seed = b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}]}'
        matches = list(_EVENT_TIME.finditer(seed))
    m, group = rng.choice(matches), rng.choice((1, 2))
    return seed[: m.start(group)] + rng.choice(_NON_FINITE) + seed[m.end(group) :]


def nested(rng: random.Random, seed: bytes) -> bytes:
    """A value nested 2,000 to 100,000 deep, as an event's `args` or a top-level value."""
    depth = rng.randint(2_000, 100_000)
    opener, closer = rng.choice(((b"[", b"]"), (b'{"a":', b"}")))
    value = opener * depth + b"1" + closer * depth
    if rng.random() < 0.5:
        return b'{"deep": ' + value + b', "traceEvents": []}'
    event = b'{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": '
    return b'{"traceEvents": [' + event + value + b"}]}"


def gzip_bomb(rng: random.Random, seed: bytes) -> bytes:
    """A gzip file of 130-200 MiB of spaces after `{"traceEvents": [`: ~1,000x its size."""
    block = gzip.compress(b" " * (1 << 20), compresslevel=9, mtime=0)
    head = gzip.compress(b'{"traceEvents": [', mtime=0)
    return head + block * rng.randint(130, 200) + gzip.compress(b"]}", mtime=0)


# Each bomb kind and the error the loader must refuse it with (issue 28).
BOMBS: dict[str, tuple[Callable[[random.Random, bytes], bytes], type[TraceError]]] = {
    "non_finite": (non_finite, NonFiniteTraceError),
    "nested": (nested, TraceNestingError),
    "gzip_bomb": (gzip_bomb, TraceBudgetError),
}


def run(
    seeds: list[bytes], cases: int, seed: int, work: Path, bomb_cases: int | None = None
) -> tuple[int, int]:
    """Load `cases` cases in this process; (loaded, refused). Every 10th is a bomb, up to
    `bomb_cases` of them (None: no limit); the rest are mutations. The input of the case running
    is in work/case.json, so a crash leaves it behind. Raises AssertionError on a case whose
    outcome is wrong (a mutation raising something else than a TraceError, a bomb loading or
    refused with another error)."""
    from analyzers.traces.load import load_raw_trace

    rng = random.Random(seed)
    path, loaded, bombs = work / "case.json", 0, 0
    kinds = list(BOMBS)
    for case in range(cases):
        expected: type[TraceError] = TraceError
        if case % 10 == 9 and (bomb_cases is None or bombs < bomb_cases):
            kind = kinds[bombs % len(kinds)]
            make, expected = BOMBS[kind]
            bombs += 1
            path.write_bytes(make(rng, rng.choice(seeds)))
        else:
            kind = "mutation"
            path.write_bytes(mutate(rng, rng.choice(seeds)))
        try:
            load_raw_trace(path)
        except TraceError as exc:  # a clear one-line refusal
            assert isinstance(exc, expected), f"case {case} ({kind}): {exc!r}"
            continue
        except Exception as exc:
            raise AssertionError(f"case {case} ({kind}): not a clear refusal: {exc!r}") from exc
        assert kind == "mutation", f"case {case} ({kind}) loaded"
        loaded += 1
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
