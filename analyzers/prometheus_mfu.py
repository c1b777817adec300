"""Measured MFU per job as a Prometheus family beside the GPU-hours families
(analyzers.prometheus_export yields it):

| family | type | labels | what |
|---|---|---|---|
| `fleetscope_job_mfu_ratio` | gauge | job_id, hpc_job, team, gpu_model, dtype | measured MFU over the metrics window (analyzers.mfu.measured) |

Only jobs whose SDK reported FLOPs, and only measured MFU: DCGM's tensor-pipe proxy is never
exported as MFU. Cardinality: the top jobs by training GPU-hours; a ratio does not sum, so the
rest are left out rather than pooled into "other". Pure: the export's refresh calls it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from prometheus_client.core import GaugeMetricFamily

if TYPE_CHECKING:
    import duckdb

Key = tuple[str, str, str, str]  # job_id, team, gpu_model, dtype


def read(
    con: duckdb.DuckDBPyConnection, start: datetime, end: datetime
) -> dict[str, tuple[Any, dict[str, Any]]]:
    """The window's measured MFU per job (analyzers.mfu.measured); none from a telemetry source
    without step metrics (a refresh must not fail for the other families' sake)."""
    from analyzers.mfu.measured import job_mfu
    from analyzers.run.window import Window

    steps = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'step_samples'"
    ).fetchone()
    return job_mfu(con, Window(start, end)) if steps and steps[0] else {}


def mfu_series(
    measured: Mapping[str, tuple[Any, Mapping[str, Any]]],
    teams: Mapping[str, str],
    top: Callable[[dict[str, float], int], set[str]],
    top_jobs: int,
) -> dict[Key, float]:
    """Measured MFU of the top jobs by training GPU-hours (`top`: the export's `top_keys`)."""
    hours = {job: float(row["training_gpu_hours"] or 0.0) for job, (_, row) in measured.items()}
    kept = top(hours, top_jobs)
    return {
        (job, teams.get(job, ""), str(row["gpu_model"]), str(row["dtype"])): float(mfu.value)
        for job, (mfu, row) in measured.items()
        if job in kept
    }


def family(series: Mapping[Key, float], slurm: frozenset[str]) -> Iterator[GaugeMetricFamily]:
    mfu = GaugeMetricFamily(
        "fleetscope_job_mfu_ratio",
        "Measured model FLOPs utilization over the metrics window: the SDK's FLOPs per step x "
        "steps/s / (GPUs x dense peak of gpu_model and dtype); jobs whose SDK reported FLOPs, "
        "the top jobs by training GPU-hours. Never DCGM's tensor-pipe proxy.",
        labels=["job_id", "hpc_job", "team", "gpu_model", "dtype"],
    )
    for (job, team, model, dtype), ratio in sorted(series.items()):
        mfu.add_metric([job, job if job in slurm else "", team, model, dtype], round(ratio, 6))
    yield mfu
