"""What-if validation: the replay's estimate from one trace of a real pair against the measured
step time of the other trace.

    python -m bench.whatif [--record DIR --rounds N] [--pairs DIR...] [--write]

Pairs: the public ResNet-50 V100 traces with 0 and 4 DataLoader workers (tests/data/traces), and
CPU pairs recorded with `torch.profiler` by `bench.whatif_record` (committed round in
tests/data/whatif_pairs/cpu_cnn; `--record` records N fresh interleaved rounds first and validates
each). The peer is the previous model (`no_dataloader_wait`: the wait removed, nothing else), in
the same run. Measured step = mean ProfilerStep duration of the variant's trace. `--write`
replaces this benchmark's section of bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "traces"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
SECTION = "## What-if validation (issue 18)"


@dataclass(frozen=True)
class Pair:
    name: str
    baseline: Path
    variant: Path
    scenario: str  # the what-if that models the change between them
    peer: str | None  # the earlier model of the same change, for comparison


def pairs(cpu_dirs: list[Path]) -> list[Pair]:
    found = [
        Pair(
            "ResNet-50 V100, 0 -> 4 DataLoader workers",
            DATA / "kineto_resnet50_nw0",
            DATA / "kineto_resnet50_nw4",
            "dataloader_workers",
            "no_dataloader_wait",
        )
    ]
    for d in cpu_dirs:
        label = f"CPU CNN ({d.name})"
        found += [
            Pair(f"{label}, 0 -> 4 workers", d / "base", d / "workers4", "dataloader_workers",
                 "no_dataloader_wait"),
            Pair(f"{label}, fp32 -> bf16 autocast", d / "base", d / "amp", "amp", None),
            Pair(f"{label}, pageable -> pin_memory", d / "base", d / "pinned", "pinned_copies",
                 None),
        ]  # fmt: skip
    return found


@dataclass(frozen=True)
class Outcome:
    pair: Pair
    measured_us: float
    estimated_us: float
    low_us: float
    high_us: float
    peer_us: float

    @property
    def error(self) -> float:
        return self.estimated_us / self.measured_us - 1.0

    @property
    def peer_error(self) -> float:
        return self.peer_us / self.measured_us - 1.0


@functools.cache
def _numbers(path: Path, host_cores: int) -> tuple[float, float, dict[str, dict[str, float]]]:
    """Measured mean step, replayed baseline and what-if rows of one trace (cached: a trace is
    analyzed once per run)."""
    from analyzers.traces.analyses.base import TraceOptions
    from analyzers.traces.api import analyze_trace

    results = analyze_trace(path, options=TraceOptions(host_cores=host_cores)).results
    w = results["whatif"]
    rows = {r["scenario"]: r for r in w.table("whatif").records()}
    measured = results["steps"].value(0, "mean_step_us")
    return measured, w.value(0, "baseline_step_us"), rows


def validate(pair: Pair, host_cores: int = 0) -> Outcome:
    """Estimate the variant's step time from the baseline trace; an unchanged estimate when the
    scenario does not apply (nothing to change: e.g. no pageable copies)."""
    _, baseline, rows = _numbers(pair.baseline, host_cores)
    measured = _numbers(pair.variant, host_cores)[0]
    row = rows.get(pair.scenario)
    est, low, high = (
        (row["estimated_step_us"], row["estimated_low_us"], row["estimated_high_us"])
        if row
        else (baseline, baseline, baseline)
    )
    peer = rows[pair.peer]["estimated_step_us"] if pair.peer and pair.peer in rows else est
    return Outcome(pair, measured, est, low, high, peer)


def aggregates(rounds: list[Outcome]) -> list[Outcome]:
    """Per change, over rounds: the median, and the minimum, of the measured and of the estimated
    step times. On a shared machine one round's pair is two runs seconds apart under different
    load (the pin_memory pair, identical work, shows that noise); load only ever adds time, so the
    minimum over rounds is the least disturbed figure of each side (the usual min-of-repeats)."""
    by_change: dict[str, list[Outcome]] = {}
    for o in rounds:
        by_change.setdefault(o.pair.name.split(", ", 1)[1], []).append(o)
    out = []
    for label, pick in (("median", statistics.median), ("minimum", min)):
        for change, group in by_change.items():
            if len(group) < 3:
                continue
            first = group[0].pair
            name = f"CPU CNN, {label} of {len(group)} rounds, {change}"

            def agg(attr: str, g: list[Outcome] = group, f: Any = pick) -> float:
                return float(f(getattr(o, attr) for o in g))

            out.append(
                Outcome(
                    Pair(name, first.baseline, first.variant, first.scenario, first.peer),
                    agg("measured_us"), agg("estimated_us"), agg("low_us"), agg("high_us"),
                    agg("peer_us"),
                )
            )  # fmt: skip
    return out


def render(outcomes: list[Outcome], command: str) -> str:
    load = os.getloadavg()[0]
    lines = [
        SECTION,
        "",
        f"Command: `{command}`. Model: `analyzers/traces/analyses/replay.py` + `whatif.py` "
        "(Daydream, Zhu et al., USENIX ATC'20: replay the trace's dependency graph with one "
        "thing changed). Estimate from the baseline trace; measured = mean ProfilerStep of the "
        "variant trace. Interval = the scenario's optimistic and pessimistic assumptions. Peer "
        "= the model before this change (`no_dataloader_wait`: the wait removed, nothing "
        "else). No GPU was lent to this task: the GPU pair is the public V100 one; the pairs "
        f"recorded here are CPU-only (2-core machine shared with other jobs, load {load:.1f}).",
        "",
        "| pair | measured ms | estimate ms | interval ms | error | in interval | peer ms | "
        "peer error |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for o in outcomes:
        inside = "yes" if o.low_us <= o.measured_us <= o.high_us else "no"
        peer = f"{o.peer_us / 1e3:.1f} | {o.peer_error:+.1%}" if o.pair.peer else "- | -"
        lines.append(
            f"| {o.pair.name} | {o.measured_us / 1e3:.1f} | {o.estimated_us / 1e3:.1f} | "
            f"{o.low_us / 1e3:.1f}-{o.high_us / 1e3:.1f} | {o.error:+.1%} | {inside} | {peer} |"
        )
    errors = [abs(o.error) for o in outcomes]
    lines += [
        "",
        f"Median |error| {statistics.median(errors):.1%}, max {max(errors):.1%} over "
        f"{len(errors)} pairs; {sum(e <= 0.10 for e in errors)} of {len(errors)} within 10 %.",
        "",
        "How to read it: the first row is the issue's held-out pair (the replay that only removed "
        "the wait was -16.1 %; the workers scenario adds the main thread's dequeue and its CPU "
        "contention, kappa = 0.35 per core of worker load, taken from that pair's op durations "
        "(aten::conv2d 1.17x, batch_norm 1.20x, cudaLaunchKernel 1.24x slower with 4 workers), "
        "not from its step time). The `cpu_cnn` rows are the committed pair "
        "(tests/data/whatif_pairs, recorded when the load was lower). Single fresh rounds on this "
        "shared machine are noise: the pin_memory pair does identical work (PyTorch pins nothing "
        "without an accelerator) and still differs by up to 3x between its two runs. Load only "
        "adds time, so the minimum over rounds is the figure to judge; the pin_memory minimum row "
        "is the noise floor of that figure.",
        "",
    ]
    return "\n".join(lines)


def write_section(text: str) -> None:
    body = RESULTS.read_text()
    if SECTION in body:
        head, _, rest = body.partition(SECTION)
        nxt = rest.find("\n## ")
        body = head + text + (rest[nxt + 1 :] if nxt >= 0 else "")
    else:
        body = body.rstrip("\n") + "\n\n" + text
    RESULTS.write_text(body)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.whatif")
    parser.add_argument("--record", type=Path, default=None, help="record fresh CPU pairs here")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--pairs", type=Path, nargs="*", default=[], help="folders of pairs recorded before"
    )
    parser.add_argument("--write", action="store_true", help="update bench/RESULTS.md")
    parser.add_argument("--quick", action="store_true", help="(make bench) the committed pairs")
    args = parser.parse_args(argv)
    cpu_dirs = [ROOT / "tests" / "data" / "whatif_pairs" / "cpu_cnn", *args.pairs]
    if args.record is not None and not args.quick:
        from bench.whatif_record import main as record

        record([str(args.record), "--steps", "6", "--rounds", str(args.rounds)])
        cpu_dirs += sorted(args.record.glob("round*")) if args.rounds > 1 else [args.record]
    outcomes = [validate(p) for p in pairs(cpu_dirs)]
    outcomes += aggregates(
        [
            o
            for o in outcomes
            if o.pair.baseline.parent in args.pairs[1:] or o.pair.baseline.parent in cpu_dirs[1:]
        ]
    )
    text = render(outcomes, "python -m bench.whatif " + " ".join(argv))
    print(text)
    if args.write:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
