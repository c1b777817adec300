"""Quantile sketch benchmark (issue 6): fleetscope's QuantileSketch against its named peers.

Same run, same streams, one core: DDSketch (`ddsketch`, alpha 0.01), Apache DataSketches KLL
(k=200), REQ (k=12, high-rank accuracy, float32 as the binding only offers), t-digest
(DataSketches `tdigest_double`, k=200), fastdigest (Rust t-digest) and exact numpy. Streams of
`../shared/sketches.md`: Pareto (shape 1.5), integer GPU utilization in [0, 100] (many zeros, mass
near 95), lognormal latency. Measures insert throughput (batches of 1k, 10k, 100k, all; scalar
adds), value and rank error at p50/p90/p99/p99.9, serialized size, merge time (100 parts into one),
query time, and a sliding window (push + query per slide) with its worst windowed p99 error.

    .venv/bin/python -m bench.sketch            # 10 M values per stream, about 5-8 minutes
    .venv/bin/python -m bench.sketch --quick    # 1 M values, under a minute

It prints markdown tables for bench/RESULTS.md. Throughputs are the median of `--repeats` runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import numpy.typing as npt

from analyzers.sketch.core import QuantileSketch, SlidingQuantiles

QS = (0.5, 0.9, 0.99, 0.999)
Floats = npt.NDArray[np.float64]


def make_streams(n: int, seed: int = 1) -> dict[str, Floats]:
    rng = np.random.default_rng(seed)
    busy = np.clip(rng.normal(95.0, 8.0, n), 0, 100)
    idle = rng.random(n) < 0.2
    return {
        "pareto": rng.pareto(1.5, n) + 1.0,
        "utilization": np.where(idle, 0.0, np.round(busy)),
        "lognormal": rng.lognormal(np.log(0.05), 1.0, n),  # seconds; median 50 ms
    }


@dataclass
class Peer:
    """One sketch under test, behind the few operations the benchmark needs."""

    name: str
    new: Callable[[], Any]
    add_batch: Callable[[Any, Floats], None]
    add_scalar: Callable[[Any, float], None] | None
    quantiles: Callable[[Any, Sequence[float]], list[float]]
    size: Callable[[Any], int]
    merge: Callable[[Any, Any], Any]  # (into, other) -> the merged sketch
    scalar_only: bool = False


def _ours() -> Peer:
    def add_batch(s: QuantileSketch, x: Floats) -> None:
        s.add(x)

    return Peer(
        name="fleetscope QuantileSketch (1 %)",
        new=QuantileSketch,
        add_batch=add_batch,
        add_scalar=QuantileSketch.add,
        quantiles=lambda s, qs: s.quantiles(qs).tolist(),
        size=lambda s: len(s.to_bytes()),
        merge=lambda a, b: a.merge(b),
    )


class _Exact:
    """Exact numpy: keep every value, sort-select at query time (`inverted_cdf`)."""

    def __init__(self) -> None:
        self.parts: list[Floats] = []
        self.scalars: list[float] = []

    def values(self) -> Floats:
        return np.concatenate([*self.parts, np.array(self.scalars, dtype=np.float64)])


def _exact() -> Peer:
    def add_batch(s: _Exact, x: Floats) -> None:
        s.parts.append(x.copy())

    def merge(a: _Exact, b: _Exact) -> _Exact:
        a.parts.extend(b.parts)
        a.scalars.extend(b.scalars)
        return a

    return Peer(
        name="exact numpy (keeps every value)",
        new=_Exact,
        add_batch=add_batch,
        add_scalar=lambda s, v: s.scalars.append(v),
        quantiles=lambda s, qs: np.quantile(s.values(), qs, method="inverted_cdf").tolist(),
        size=lambda s: s.values().nbytes,
        merge=merge,
    )


def _peers() -> list[Peer]:
    import datasketches as ds
    import fastdigest
    from ddsketch import DDSketch
    from ddsketch.pb.proto import DDSketchProto

    def dd_batch(s: Any, x: Floats) -> None:
        add = s.add
        for v in x.tolist():
            add(v)

    def dd_merge(a: Any, b: Any) -> Any:
        a.merge(b)
        return a

    def ds_merge(a: Any, b: Any) -> Any:
        a.merge(b)
        return a

    def fd_merge(a: Any, b: Any) -> Any:
        a.merge_inplace(b)
        return a

    return [
        Peer(
            name="DDSketch 3 (pure Python, alpha 0.01)",
            new=lambda: DDSketch(0.01),
            add_batch=dd_batch,
            add_scalar=lambda s, v: s.add(v),
            quantiles=lambda s, qs: [s.get_quantile_value(q) for q in qs],
            size=lambda s: len(DDSketchProto.to_proto(s).SerializeToString()),  # type: ignore[no-untyped-call]
            merge=dd_merge,
            scalar_only=True,
        ),
        Peer(
            name="DataSketches KLL k=200",
            new=lambda: ds.kll_doubles_sketch(200),
            add_batch=lambda s, x: s.update(x),
            add_scalar=lambda s, v: s.update(v),
            quantiles=lambda s, qs: list(s.get_quantiles(list(qs), True)),
            size=lambda s: len(s.serialize()),
            merge=ds_merge,
        ),
        Peer(
            name="DataSketches REQ k=12 HRA (float32)",
            new=lambda: ds.req_floats_sketch(12, True),
            add_batch=lambda s, x: s.update(x.astype(np.float32)),
            add_scalar=lambda s, v: s.update(v),
            quantiles=lambda s, qs: [float(s.get_quantile(q, True)) for q in qs],
            size=lambda s: len(s.serialize()),
            merge=ds_merge,
        ),
        Peer(
            name="DataSketches t-digest k=200",
            new=lambda: ds.tdigest_double(200),
            add_batch=lambda s, x: s.update(x),
            add_scalar=lambda s, v: s.update(v),
            quantiles=lambda s, qs: [s.get_quantile(q) for q in qs],
            size=lambda s: len(s.serialize()),
            merge=ds_merge,
        ),
        Peer(
            name="fastdigest (Rust t-digest)",
            new=fastdigest.TDigest,
            add_batch=lambda s, x: s.batch_update(x),
            add_scalar=lambda s, v: s.update(v),
            quantiles=lambda s, qs: [s.quantile(q) for q in qs],
            size=lambda s: len(s.to_bytes()),
            merge=fd_merge,
        ),
    ]


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def insert_rate(peer: Peer, data: Floats, batch: int, repeats: int) -> float:
    """Values per second ingesting `data` in calls of `batch` values."""
    pieces = [data[i : i + batch] for i in range(0, data.size, batch)]

    def run() -> None:
        sketch = peer.new()
        for piece in pieces:
            peer.add_batch(sketch, piece)
        peer.quantiles(sketch, [0.5])  # flush anything buffered: the work must be done

    return data.size / _median_time(run, repeats)


def scalar_rate(peer: Peer, data: Floats, repeats: int) -> float:
    values = data.tolist()
    assert peer.add_scalar is not None

    def run() -> None:
        sketch = peer.new()
        add = peer.add_scalar
        assert add is not None
        if peer.name.startswith("fleetscope"):
            add = sketch.add  # the bound method, as a caller holds it
            for v in values:
                add(v)
        else:
            for v in values:
                add(sketch, v)
        peer.quantiles(sketch, [0.5])

    return len(values) / _median_time(run, repeats)


def errors(
    answers: Sequence[float], ordered: Floats, qs: Sequence[float]
) -> tuple[list[float], list[float]]:
    """(relative value error, absolute rank error) of each answer against the exact data."""
    n = ordered.size
    exact = np.quantile(ordered, qs, method="inverted_cdf")
    value = [abs(a - e) / abs(e) if e else abs(a) for a, e in zip(answers, exact, strict=True)]
    rank = []
    for a, q in zip(answers, qs, strict=True):
        lo = np.searchsorted(ordered, a, side="left") / n
        hi = np.searchsorted(ordered, a, side="right") / n
        rank.append(0.0 if lo <= q <= hi else min(abs(q - lo), abs(q - hi)))
    return value, rank


def per_call_us(fn: Callable[[], object], number: int, budget_s: float = 0.5) -> float:
    """Mean microseconds per call over `number` calls, or fewer once `budget_s` is spent (exact
    numpy takes a second per query at 10 M values)."""
    start = time.perf_counter()
    calls = 0
    while calls < number and (calls == 0 or time.perf_counter() - start < budget_s):
        fn()
        calls += 1
    return (time.perf_counter() - start) / calls * 1e6


def bench_stream(
    name: str, data: Floats, peers: list[Peer], args: argparse.Namespace
) -> dict[str, Any]:
    ordered = np.sort(data)
    out: dict[str, Any] = {"stream": name, "rows": []}
    n_parts = 100
    part_size = data.size // n_parts
    for peer in peers:
        row: dict[str, Any] = {"peer": peer.name}
        t0 = time.perf_counter()
        # Insert throughput.
        if peer.scalar_only:
            subset = data[: args.ddsketch_values]
            rate = insert_rate(peer, subset, subset.size, 1)
            row["insert"] = {b: rate for b in ("1k", "10k", "100k", "all")}
        else:
            row["insert"] = {
                label: insert_rate(peer, data, size, args.repeats)
                for label, size in (
                    ("1k", 1_000),
                    ("10k", 10_000),
                    ("100k", 100_000),
                    ("all", data.size),
                )
            }
        scalars = data[: args.scalar_values]
        row["scalar"] = scalar_rate(peer, scalars, 1 if peer.scalar_only else args.repeats)
        # Accuracy, size and query time on one sketch of the whole stream.
        sketch = peer.new()
        if peer.scalar_only:
            for piece in np.array_split(data, 10):
                peer.add_batch(sketch, piece)
        else:
            peer.add_batch(sketch, data)
        answers = peer.quantiles(sketch, QS)
        row["value_err"], row["rank_err"] = errors(answers, ordered, QS)
        row["size"] = peer.size(sketch)
        row["query_us"] = per_call_us(partial(peer.quantiles, sketch, QS), 200)
        # Merge: 100 parts of the stream into one.
        parts_data = [data[i * part_size : (i + 1) * part_size] for i in range(n_parts)]
        if peer.scalar_only:  # pure Python insert: parts from the DDSketch subset only
            parts_data = np.array_split(data[: args.ddsketch_values], n_parts)
        parts = []
        for piece in parts_data:
            part = peer.new()
            peer.add_batch(part, piece)
            parts.append(part)
        merge_times = []
        for _ in range(5):  # each time into a fresh sketch; the parts are never changed
            merged = peer.new()
            start = time.perf_counter()
            for part in parts:
                merged = peer.merge(merged, part)
            merge_times.append((time.perf_counter() - start) / n_parts * 1e6)
        row["merge_us"] = statistics.median(merge_times)
        if peer.scalar_only:
            row["merged_value_err"] = None
        else:
            row["merged_value_err"] = max(errors(peer.quantiles(merged, QS), ordered, QS)[0])
        if isinstance(merged, QuantileSketch):
            row["lossless"] = merged.buckets()[1].tolist() == sketch.buckets()[1].tolist() and (
                merged.top == sketch.top and merged.bottom == sketch.bottom
            )
            row["part_buckets"] = int(parts[0].buckets()[0].size)
        row["window"] = sliding(peer, data, args)
        row["seconds"] = time.perf_counter() - t0
        out["rows"].append(row)
        print(f"  {name:12s} {peer.name:40s} done in {row['seconds']:.1f} s", flush=True)
    return out


def sliding(peer: Peer, data: Floats, args: argparse.Namespace) -> dict[str, float]:
    """Per-slide cost (push the new pane, p99 of the window) and the worst windowed p99 error.
    fleetscope adds and subtracts counts; the peers cannot subtract, so each slide re-merges the
    window's panes (what a dashboard using them has to do)."""
    pane_values, window = args.pane_values, args.window_panes
    slides = args.slides if not peer.scalar_only else max(5, args.slides // 10)
    n_panes = window + slides
    panes = []
    for i in range(n_panes):
        pane = peer.new()
        peer.add_batch(pane, data[i * pane_values : (i + 1) * pane_values])
        panes.append(pane)
    worst = 0.0
    checks = set(range(window, n_panes, max(1, slides // 5)))
    if peer.name.startswith("fleetscope"):
        win = SlidingQuantiles(panes=window)
        for pane in panes[:window]:
            win.push(pane)
        start = time.perf_counter()
        answers = {}
        for i in range(window, n_panes):
            win.push(panes[i])
            answers[i] = win.quantiles([0.99])[0]
        elapsed = time.perf_counter() - start
    else:
        start = time.perf_counter()
        answers = {}
        for i in range(window, n_panes):
            merged = peer.new()
            for pane in panes[i - window + 1 : i + 1]:
                merged = peer.merge(merged, pane)
            answers[i] = peer.quantiles(merged, [0.99])[0]
        elapsed = time.perf_counter() - start
    for i in checks:
        exact = np.quantile(
            data[(i - window + 1) * pane_values : (i + 1) * pane_values],
            0.99,
            method="inverted_cdf",
        )
        worst = max(worst, abs(answers[i] - exact) / exact)
    return {"slide_us": elapsed / slides * 1e6, "p99_err": worst}


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.3g} %"


def report(results: list[dict[str, Any]]) -> str:
    lines = []
    for res in results:
        lines += [f"\n#### {res['stream']}\n"]
        lines += [
            "| sketch | insert M/s 1k / 10k / 100k / all | scalar M/s | value err p50 / p90 / p99 / p99.9 "
            "| worst rank err | size B | merge us | value err after 100 merges | query us "
            "| slide+p99 us | worst window p99 err |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for row in res["rows"]:
            ins = row["insert"]
            rates = " / ".join(f"{ins[b] / 1e6:.3g}" for b in ("1k", "10k", "100k", "all"))
            if any(r.startswith("DDSketch") for r in [row["peer"]]):
                rates = f"{ins['all'] / 1e6:.3g} (scalar loop)"
            verr = " / ".join(_pct(v) for v in row["value_err"])
            note = ""
            if "lossless" in row:
                note = f" ({row['part_buckets']} buckets/part, lossless: {row['lossless']})"
            lines.append(
                f"| {row['peer']} | {rates} | {row['scalar'] / 1e6:.3g} | {verr} | "
                f"{_pct(max(row['rank_err']))} | {row['size']} | {row['merge_us']:.3g}{note} | "
                f"{_pct(row['merged_value_err'])} | {row['query_us']:.3g} | "
                f"{row['window']['slide_us']:.4g} | {_pct(row['window']['p99_err'])} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.sketch", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="1 M values per stream, 1 repeat")
    parser.add_argument("--values", type=int, default=10_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated stream names")
    parser.add_argument("--no-peers", action="store_true", help="fleetscope's sketch alone")
    args = parser.parse_args(argv)
    if args.quick:
        args.values, args.repeats = 1_000_000, 1
    args.scalar_values = min(args.values, 1_000_000)
    args.ddsketch_values = min(args.values, 1_000_000)
    args.pane_values, args.window_panes = 10_000, 60
    args.slides = min(300, args.values // args.pane_values - args.window_panes)
    streams = make_streams(args.values)
    if args.only:
        streams = {k: v for k, v in streams.items() if k in args.only.split(",")}
    peers = [_ours()] + ([] if args.no_peers else [*_peers(), _exact()])
    print(f"values per stream: {args.values:,}; repeats: {args.repeats}; numpy {np.__version__}")
    results = [bench_stream(name, data, peers, args) for name, data in streams.items()]
    print(report(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
