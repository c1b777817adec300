"""Fleet percentiles: the one definition the CLI, the dashboard and the reports all use.

A GPU that no job holds is idle by construction; counting it would drag every utilization
percentile towards 0 and say nothing about how well jobs use what they hold. So a percentile of a
GPU metric counts the samples of *allocated* GPUs (`job_id IS NOT NULL`) unless asked for the whole
fleet (`scope="all"`, `fleetscope quantiles --gpus all`). Host and step metrics have no such
distinction (a host row without a job is the whole host), so the scope does not filter them.

`fleetscope quantiles` and the dashboard's Percentiles table both call `percentiles`; a test
asserts that they print the same numbers. Values come from the analyzers' quantile sketches
(`analyzers.quantiles.store`: either mode's store), within their 1 % relative error.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from analyzers.quantiles.panes import METRICS
from analyzers.quantiles.reading import group_sketches
from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    import duckdb

    from analyzers.sketch.core import QuantileSketch

Scope = Literal["allocated", "all"]
SCOPES: tuple[Scope, ...] = ("allocated", "all")
ALLOCATED_GPUS = "job_id IS NOT NULL"


def scope_where(metric: str, scope: Scope) -> str:
    """The SQL condition that gives `metric`'s samples in `scope`."""
    if metric not in METRICS:
        raise ConfigError(
            f"unknown metric {metric!r}; sketched metrics: {', '.join(sorted(METRICS))}"
        )
    if scope not in SCOPES:
        raise ConfigError(f"unknown GPU scope {scope!r}; one of {', '.join(SCOPES)}")
    if scope == "allocated" and METRICS[metric].table == "gpu_samples":
        return ALLOCATED_GPUS
    return "TRUE"


def scope_note(metric: str, scope: Scope) -> str:
    """What the numbers count, in words, for a caption or a CLI header."""
    if METRICS[metric].table != "gpu_samples":
        return "every sample"
    if scope == "allocated":
        return "samples of allocated GPUs (GPUs no job holds left out)"
    return "samples of every GPU, allocated or not"


def percentiles(
    conn: duckdb.DuckDBPyConnection,
    metric: str,
    keys: Sequence[str],
    start: datetime,
    end: datetime,
    scope: Scope = "allocated",
) -> dict[tuple[object, ...], QuantileSketch]:
    """One merged sketch per group of `keys` for [start, end), over `scope`'s samples."""
    return group_sketches(conn, metric, keys, start, end, scope_where(metric, scope))
