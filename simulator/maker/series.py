"""The fleet maker's crafted series: a few GPUs, hosts and ranks whose every value a test chooses.

A `Fleet` collects rows; each field of a series is a constant or a function of (sample index,
seconds since the series start), and a GPU is busy and healthy (`HEALTHY`) unless a test says
otherwise. Rows go through `fleetscope.contract.conform`, so every table follows the data
contract; `connect()` loads them into a DuckDB database file or memory (`tables.connect`) and
`tables.publish` writes them as live segments. Use it for rule tests (row by row in Python: a few
GPU-days at most); `jobs.Fleet` is the vectorized maker for weeks of a thousand GPUs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from simulator.maker import tables as out

if TYPE_CHECKING:
    import duckdb

T0 = datetime(2025, 3, 3, tzinfo=UTC)  # a Monday, 00:00 UTC

Value = Any | Callable[[int, float], Any]

# A busy, healthy GPU: what every series looks like unless a test says otherwise.
HEALTHY: dict[str, Any] = {
    "gpu_model": "NVIDIA H100 80GB HBM3",
    "gpu_util": 95.0,
    "gr_engine_active": 0.95,
    "sm_active": 0.85,
    "sm_occupancy": 0.5,
    "tensor_active": 0.4,
    "dram_active": 0.35,
    "fb_used_mib": 60000.0,
    "fb_free_mib": 21559.0,
    "power_w": 600.0,
    "temp_c": 60.0,
    "sm_clock_mhz": 1980.0,
    "mem_clock_mhz": 2619.0,
    "xid_last": 0.0,
    "ecc_dbe_total": 0.0,
    "pcie_replay_total": 0.0,
    "power_violation_us": 0.0,
    "thermal_violation_us": 0.0,
    "clocks_event_reasons": 0.0,
}
HOST_DEFAULTS: dict[str, Any] = {
    "cpu_user_pct": 30.0,
    "cpu_system_pct": 5.0,
    "cpu_iowait_pct": 1.0,
    "cpu_cores": 64.0,
    "mem_used_bytes": 200e9,
    "mem_total_bytes": 1000e9,
}


def _value(v: Value, i: int, t: float) -> Any:
    return v(i, t) if callable(v) else v


@dataclass
class Fleet:
    gpu_rows: list[dict[str, Any]] = field(default_factory=list)
    host_rows: list[dict[str, Any]] = field(default_factory=list)
    step_rows: list[dict[str, Any]] = field(default_factory=list)

    def gpus(
        self,
        job: str | None,
        host: str,
        gpus: range | list[int],
        start_min: float,
        minutes: float,
        interval_s: float = 10.0,
        skip: Callable[[int, float], bool] | None = None,
        **fields: Value,
    ) -> Fleet:
        """GPU samples every `interval_s` for `minutes` from T0 + `start_min` on each GPU."""
        spec = {**HEALTHY, **fields}
        n = int(minutes * 60 / interval_s)
        for gpu in gpus:
            for i in range(n):
                t = i * interval_s
                if skip is not None and skip(i, t):
                    continue
                row = {k: _value(v, i, t) for k, v in spec.items()}
                row.update(
                    ts=T0 + timedelta(minutes=start_min, seconds=t),
                    host=host,
                    gpu_index=gpu,
                    job_id=job,
                    cluster="c1",
                )
                self.gpu_rows.append(row)
        return self

    def host(
        self,
        host: str,
        start_min: float,
        minutes: float,
        job: str | None = None,
        interval_s: float = 10.0,
        **fields: Value,
    ) -> Fleet:
        spec = {**HOST_DEFAULTS, **fields}
        for i in range(int(minutes * 60 / interval_s)):
            t = i * interval_s
            row = {k: _value(v, i, t) for k, v in spec.items()}
            row.update(ts=T0 + timedelta(minutes=start_min, seconds=t), host=host, job_id=job)
            self.host_rows.append(row)
        return self

    def steps(
        self,
        job: str,
        host: str,
        rank: int,
        start_min: float,
        n_steps: int,
        step_time_s: Value = 0.5,
        data_wait_s: Value = 0.0,
        dataloader_workers: Value = 8,
        batch_size: Value = 64,
        flops_per_step: Value = None,
        compute_dtype: str | None = None,
    ) -> Fleet:
        t = start_min * 60.0
        for i in range(n_steps):
            step = float(_value(step_time_s, i, t))
            t += step
            self.step_rows.append(
                {
                    "ts": T0 + timedelta(seconds=t),
                    "host": host,
                    "job_id": job,
                    "rank": rank,
                    "pid": 1000 + rank,
                    "step": i,
                    "step_time_s": step,
                    "data_wait_s": float(_value(data_wait_s, i, t)),
                    "batch_size": _value(batch_size, i, t),
                    "dataloader_workers": _value(dataloader_workers, i, t),
                    "flops_per_step": _value(flops_per_step, i, t),
                    "compute_dtype": compute_dtype,
                }
            )
        return self

    def tables(self) -> dict[str, pa.Table]:
        return {
            "gpu_samples": out.rows_table("gpu_samples", self.gpu_rows),
            "host_samples": out.rows_table("host_samples", self.host_rows),
            "step_samples": out.rows_table("step_samples", self.step_rows),
        }

    def connect(self, path: Path | None = None) -> duckdb.DuckDBPyConnection:
        return out.connect(self, path)
