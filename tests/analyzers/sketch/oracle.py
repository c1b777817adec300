"""Oracles shared by the quantile-sketch specifications: numpy's exact `inverted_cdf` quantile."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import numpy.typing as npt

import analyzers.sketch.core as sketch_module
from analyzers.sketch.core import QuantileSketch

# Every quantile a dashboard or rule asks for, plus the edges and awkward fractions.
QS = np.array(
    [0.0, 1e-9, 0.001, 0.01, 0.05, 0.1, 0.25, 1 / 3, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 1.0]
)


def assert_value_error_within(
    sketch_answers: npt.ArrayLike, data: npt.ArrayLike, qs: npt.ArrayLike, bound: float
) -> None:
    """Each answer lies within `bound` relative error of the exact order statistic numpy picks
    (`inverted_cdf`), and inside the exact [min, max] of the data (the rank interval check: the
    answer's own rank interval in the data must touch the rank of that order statistic's bucket)."""
    values = np.asarray(data, dtype=np.float64)
    values = values[~np.isnan(values)]
    answers = np.asarray(sketch_answers, dtype=np.float64)
    exact = np.quantile(values, np.asarray(qs, dtype=np.float64), method="inverted_cdf")
    ordered = np.sort(values)
    slack = bound * (1 + 1e-9)
    for q, got, want in zip(
        np.atleast_1d(qs), np.atleast_1d(answers), np.atleast_1d(exact), strict=True
    ):
        got, want = float(got), float(want)  # Python floats: overflow is inf, not a warning
        assert abs(got - want) <= slack * abs(want), (q, got, want)
        assert values.min() <= got <= values.max(), (q, got)
        # Rank interval: sorted positions where `got` could sit must reach the values within the
        # bound of `want`, so the answer never jumps over an order statistic outside the bound.
        lo_rank = np.searchsorted(ordered, got, side="left")
        with np.errstate(over="ignore"):
            within = np.abs(ordered - want) <= slack * abs(want)
        ranks = np.flatnonzero(within)
        assert ranks.size and ranks[0] <= lo_rank <= ranks[-1] + 1, (q, got, want)


def state(sketch: QuantileSketch) -> tuple[object, ...]:
    """Everything the sketch's answers depend on, for bit-identity comparisons (sum aside)."""
    ids, counts = sketch.buckets()
    return (
        ids.tolist(),
        counts.tolist(),
        sketch.count,
        sketch.nan_count,
        sketch.zero_count,
        [v.hex() for v in sketch.top],
        [v.hex() for v in sketch.bottom],
    )


@contextmanager
def ingest_chunk(size: int) -> Iterator[None]:
    """Run ingest with tiny chunks, so small examples cross chunk boundaries and fold pending
    parts exactly as 10 M-value batches do."""
    saved = sketch_module.CHUNK
    sketch_module.CHUNK = size
    try:
        yield
    finally:
        sketch_module.CHUNK = saved
