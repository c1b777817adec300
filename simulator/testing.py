"""Synthetic contract batches and a minimal wire-format client, for ingest tests and bench/ingest.

The batches look like an 8-GPU host sampled at a fixed interval: every contract column is filled
with plausible values (utilisation ratios in 0-1, percentages in 0-100, memory in MiB, a job id on
allocated GPUs, one unknown exporter field in `extra`), so compression, casting and the catalog
hooks see what real agents send. `post` speaks the wire format of fleetscope.contract over one
http.client connection. This module must never be imported by the server's request path.
"""

from __future__ import annotations

import http.client
import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

from fleetscope.contract import (
    ARROW_STREAM_MEDIA_TYPE,
    GPU_SAMPLES,
    HEADER_AGENT,
    HEADER_BATCH_ID,
    HEADER_SCHEMA_VERSION,
    HOST_SAMPLES,
    SCHEMA_VERSION,
    to_ipc,
)

TEST_TOKEN = "test-token"  # the bearer token the warehouse tests configure in server.tokens

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
    return pa.table(
        [columns.get(f.name, pa.nulls(n, f.type)) for f in GPU_SAMPLES], schema=GPU_SAMPLES
    )


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
    return pa.table(
        [data.get(f.name, pa.nulls(n, f.type)) for f in HOST_SAMPLES], schema=HOST_SAMPLES
    )


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, object]
    headers: dict[str, str]


def headers_for(batch_id: str, token: str, agent: str = "") -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Content-Type": ARROW_STREAM_MEDIA_TYPE,
        HEADER_SCHEMA_VERSION: str(SCHEMA_VERSION),
        HEADER_BATCH_ID: batch_id,
        HEADER_AGENT: agent,
        "User-Agent": "fleetscope-agent/0.1.0",
    }


def post(
    conn: http.client.HTTPConnection,
    path: str,
    body: bytes,
    headers: dict[str, str],
) -> Answer:
    """One request on a kept-alive connection; the JSON answer and its headers."""
    conn.request("POST", path, body=body, headers=headers)
    response = conn.getresponse()
    raw = response.read()
    payload = json.loads(raw) if raw else {}
    return Answer(response.status, payload, {k.lower(): v for k, v in response.getheaders()})


def post_batch(
    base_url: str,
    table: str,
    batch: pa.Table,
    *,
    token: str,
    batch_id: str | None = None,
    agent: str = "",
) -> Answer:
    """Serialize and send one batch on a fresh connection (tests)."""
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        return post(
            conn,
            f"/v1/batches/{table}",
            to_ipc(batch),
            headers_for(batch_id or uuid.uuid4().hex, token, agent),
        )
    finally:
        conn.close()
