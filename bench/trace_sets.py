"""Large multi-rank trace sets built from one real shared trace, for the decoder and the
bounded-memory benchmarks (issue 29).

    .venv/bin/python -m bench.trace_sets --size-mb 200 --out /tmp/sets/200mb [--base DIR]

A set is `--ranks` (8) plain-JSON Kineto files, `rank-<r>.json`, together about `--size-mb` of
text. Copies past the last whole one
take the events that start in the first part of the span (a shorter capture of the same run). Each rank file is the base trace's `traceEvents` repeated: copy k has its timestamps shifted
by k times the trace's span (plus a 1 ms gap), its ids (`correlation`, `External id`, flow `id`)
shifted past the previous copy's, and its `ProfilerStep#N` renumbered after the previous copy's
steps, so the copies read as later iterations of the same run; `distributedInfo.rank` is r. The
other top-level keys (`deviceProperties`, ...) are kept and written as the profiler writes them,
with a space after each colon: HTA finds a file's rank by the text `"rank": N` (space included),
so compact metadata made every file rank 0 to HTA (and to `--hta-compatible`), and HTA then read
one file of the set. Events are written one a line, compact, as msgspec encodes them. Base: hta_trace_diff_control_rank3 (an 8-rank A100 job's rank 3, the
largest shared trace: 109 k events, 35 MB of pretty-printed text).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path
from typing import Any

import msgspec

DEFAULT_BASE = Path("/work/shared/data/traces/hta_trace_diff_control_rank3")
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_ID_ARGS = ("correlation", "External id", "external id")
_GAP_US = 1000.0


def read_document(folder: Path) -> dict[str, Any]:
    path = sorted(p for p in folder.iterdir() if p.name.endswith((".json", ".gz")))[0]
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    document: dict[str, Any] = msgspec.json.decode(data)
    return document


class _Shifter:
    """What copy k adds to each event's time, ids and step number."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        ts = [e["ts"] for e in events if isinstance(e.get("ts"), int | float)]
        ends = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), int | float)]
        self.span = float(max(ends) - min(ts)) + _GAP_US
        ids = [0]
        for e in events:
            args = e.get("args") or {}
            ids += [args[k] for k in _ID_ARGS if isinstance(args.get(k), int)]
            if isinstance(e.get("id"), int):
                ids.append(e["id"])
        self.id_step = max(ids) + 1
        steps = [int(m.group(1)) for e in events if (m := _STEP.match(str(e.get("name", ""))))]
        self.step_count = (max(steps) - min(steps) + 1) if steps else 0

    def copy(self, event: dict[str, Any], k: int) -> dict[str, Any]:
        if k == 0:
            return event
        out = dict(event)
        if isinstance(out.get("ts"), int | float) and out.get("ph") != "M":
            ts = out["ts"] + k * self.span
            out["ts"] = int(ts) if isinstance(event["ts"], int) and ts == int(ts) else ts
        if isinstance(out.get("id"), int):
            out["id"] = out["id"] + k * self.id_step
        args = out.get("args")
        if isinstance(args, dict) and any(isinstance(args.get(a), int) for a in _ID_ARGS):
            args = dict(args)
            for a in _ID_ARGS:
                if isinstance(args.get(a), int) and args[a] >= 0:
                    args[a] += k * self.id_step
            out["args"] = args
        if self.step_count and (m := _STEP.match(str(out.get("name", "")))):
            out["name"] = f"ProfilerStep#{int(m.group(1)) + k * self.step_count}"
        return out


def build_set(base: Path, out: Path, size_mb: float, ranks: int = 8) -> list[Path]:
    """Write the set (module docstring) and return its files."""
    document = read_document(base)
    events: list[dict[str, Any]] = document.pop("traceEvents")
    shifter = _Shifter(events)
    encode = msgspec.json.Encoder().encode
    lines = [encode(e) for e in events]
    copy_bytes = sum(len(line) + 2 for line in lines)
    # Whole copies, then a first part of one more (the events that start in that fraction of
    # the span: a shorter capture of the same run), to bring a rank nearest its share.
    copies = size_mb * 1e6 / ranks / copy_bytes
    full, fraction = int(copies), copies - int(copies)
    t0 = min(e["ts"] for e in events if isinstance(e.get("ts"), int | float))
    cut = t0 + fraction * (shifter.span - _GAP_US)
    window = [
        i
        for i, e in enumerate(events)
        if not isinstance(e.get("ts"), int | float) or e.get("ph") == "M" or e["ts"] < cut
    ]
    plan = [(k, None) for k in range(full)] + ([(full, window)] if fraction > 0.01 else [])
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for rank in range(ranks):
        head = dict(document)
        info = dict(head.get("distributedInfo") or {})
        info.update(rank=rank, world_size=ranks)
        head["distributedInfo"] = info
        path = out / f"rank-{rank}.json"
        with path.open("wb") as f:
            f.write(json.dumps(head).encode()[:-1] + b', "traceEvents": [\n')
            for n, (k, rows) in enumerate(plan):
                picked = range(len(events)) if rows is None else rows
                part = [lines[i] if k == 0 else encode(shifter.copy(events[i], k)) for i in picked]
                f.write((b"" if n == 0 else b",\n") + b",\n".join(part))
            f.write(b"\n]}\n")
        files.append(path)
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--base", type=Path, default=DEFAULT_BASE)
    parser.add_argument("--ranks", type=int, default=8)
    args = parser.parse_args(argv)
    files = build_set(args.base, args.out, args.size_mb, args.ranks)
    total = sum(p.stat().st_size for p in files)
    print(f"{len(files)} files, {total / 1e6:.0f} MB in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
