"""The fleet maker's ingest batches: one host's contract rows with plausible random values.

The batches look like an 8-GPU host sampled at a fixed interval: every contract column is filled
with plausible values (utilisation ratios in 0-1, percentages in 0-100, memory in MiB, a job id on
allocated GPUs, one unknown exporter field in `extra`), so compression, casting and the catalog
hooks see what real agents send; the values are drawn from `seed`, so a test sees the same rows
every run. For rows whose values a test chooses use `series.Fleet`; for weeks of jobs, `jobs`.
`simulator.wire` sends them. This module must never be imported by the server's request path.
"""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from fleetscope.contract import GPU_SAMPLES, HOST_SAMPLES
from simulator.maker.tables import contract_table

# Today's UTC midnight: synthetic samples stay inside raw retention whenever tests run.
EPOCH_MS = int(
    datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0).timestamp() * 1000
)


def gpu_batch(
    host: str,
    *,
    start_ms: int = EPOCH_MS,
    timestamps: int = 10,
    gpus: int = 8,
    interval_ms: int = 1000,
    job_id: str | None = "job-1",
    cluster: str = "sim",
    seed: int = 0,
) -> pa.Table:
    """`timestamps` x `gpus` rows of gpu_samples for one host, ordered by time then GPU."""
    rng = np.random.default_rng(seed)
    n = timestamps * gpus
    ts = np.repeat(start_ms + np.arange(timestamps, dtype=np.int64) * interval_ms, gpus)
    gpu_index = np.tile(np.arange(gpus, dtype=np.int16), timestamps)
    ratio = rng.uniform(0.0, 1.0, size=n)
    columns: dict[str, pa.Array] = {
        "ts": pa.array(ts, pa.timestamp("ms", tz="UTC")),
        "cluster": pa.array([cluster] * n),
        "host": pa.array([host] * n),
        "gpu_index": pa.array(gpu_index),
        "gpu_uuid": pa.array([f"GPU-{host}-{i}" for i in gpu_index]),
        "gpu_model": pa.array(["NVIDIA H100 80GB HBM3"] * n),
        "job_id": pa.array([job_id] * n, pa.string()),
        "attribution": pa.array(["hpc_job" if job_id else None] * n, pa.string()),
    }
    for field in GPU_SAMPLES:
        if field.name in columns or field.name == "extra" or not pa.types.is_floating(field.type):
            continue
        scale = 100.0 if field.name.endswith("util") else 1.0
        if field.name.endswith(("_mib", "_w", "_c", "_mhz", "_bytes_s", "_us")):
            scale = 1000.0
        columns[field.name] = pa.array(np.round(ratio * scale + rng.normal(0, 0.01, n) * scale, 3))
    columns["extra"] = pa.array(
        [[("DCGM_FI_PROF_NVOFA_ACTIVE", float(r))] for r in ratio], GPU_SAMPLES.field("extra").type
    )
    return contract_table(GPU_SAMPLES, columns, n)


def host_batch(host: str, *, start_ms: int = EPOCH_MS, timestamps: int = 10) -> pa.Table:
    n = timestamps
    data: dict[str, pa.Array] = {
        "ts": pa.array(
            start_ms + np.arange(n, dtype=np.int64) * 1000, pa.timestamp("ms", tz="UTC")
        ),
        "cluster": pa.array(["sim"] * n),
        "host": pa.array([host] * n),
    }
    for field in HOST_SAMPLES:
        if field.name not in data and field.name != "job_id":
            data[field.name] = pa.array(np.linspace(1.0, 50.0, n))
    return contract_table(HOST_SAMPLES, data, n)
