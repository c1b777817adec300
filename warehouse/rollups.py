"""Per-minute and per-hour roll-ups of gpu_samples, derived from segments day by day.

gpu_samples_1m and gpu_samples_1h hold, per (bucket, cluster, host, GPU index, job), the sample
count and the mean and max of the main utilisation columns, so a week-long fleet query reads
1/60 or 1/3600 of the raw rows (design.md: weekly report < 30 s, dashboard page < 2 s).

Incremental by UTC day: a day is rolled up again only when its raw input changed, which the
manifest's mark `rollup/<day>` records as "<highest segment seq>:<row count>"; compaction keeps
both, so merging files never triggers recomputation. Both roll-ups of a day go live in one
manifest swap. A day whose raw segments retention removed keeps its roll-ups. This module must
never modify raw segments or the telemetry DuckDB file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import duckdb
import pyarrow as pa

from fleetscope.contract import GPU_SAMPLES
from warehouse.segments import Segment, SegmentStore

SOURCE_TABLE: Final = "gpu_samples"

# The columns analyzers and the dashboard aggregate over time: utilisation, memory, power,
# temperature, clocks and interconnect traffic. Counters and bitmasks are not averaged.
ROLLUP_COLUMNS: Final = (
    "gpu_util",
    "gr_engine_active",
    "sm_active",
    "sm_occupancy",
    "tensor_active",
    "dram_active",
    "fp16_active",
    "fp32_active",
    "fp64_active",
    "mem_copy_util",
    "fb_used_mib",
    "power_w",
    "temp_c",
    "sm_clock_mhz",
    "pcie_tx_bytes_s",
    "pcie_rx_bytes_s",
    "nvlink_tx_bytes_s",
    "nvlink_rx_bytes_s",
)

ROLLUP_SCHEMA: Final = pa.schema(
    [
        pa.field("bucket_ts", GPU_SAMPLES.field("ts").type, nullable=False),
        GPU_SAMPLES.field("cluster"),
        GPU_SAMPLES.field("host"),
        GPU_SAMPLES.field("gpu_index"),
        GPU_SAMPLES.field("job_id"),
        pa.field("samples", pa.int64(), nullable=False),
        *(
            pa.field(f"{column}_{stat}", pa.float64())
            for column in ROLLUP_COLUMNS
            for stat in ("mean", "max")
        ),
    ]
)

BUCKETS: Final[Mapping[str, str]] = {"gpu_samples_1m": "minute", "gpu_samples_1h": "hour"}
ROLLUP_TABLES: Final[Mapping[str, pa.Schema]] = {name: ROLLUP_SCHEMA for name in BUCKETS}


def _mark(segments: list[Segment]) -> str:
    return f"{max(s.seq for s in segments)}:{sum(s.rows for s in segments)}"


def _query(files: list[str], unit: str) -> str:
    stats = ", ".join(f"avg({c}) AS {c}_mean, max({c}) AS {c}_max" for c in ROLLUP_COLUMNS)
    listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
    return (
        f"SELECT date_trunc('{unit}', ts) AS bucket_ts, cluster, host, gpu_index, job_id, "
        f"count(*) AS samples, {stats} FROM read_parquet([{listed}], hive_partitioning = false) "
        "GROUP BY ALL ORDER BY host, gpu_index, bucket_ts"
    )


def update_rollups(store: SegmentStore) -> int:
    """Roll up every day whose raw segments changed since its last roll-up; returns days done."""
    manifest = store.snapshot()
    done = 0
    conn = duckdb.connect(":memory:")
    try:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute("SET threads = 1")  # background work: leave the cores to ingest
        for date, raw in sorted(manifest.by_date(SOURCE_TABLE).items()):
            mark = _mark(raw)
            if manifest.marks.get(f"rollup/{date}") == mark:
                continue
            files = [str(store.path(s)) for s in raw]
            changes: dict[str, tuple[list[Segment], list[Segment]]] = {}
            seq = max(s.seq for s in raw)
            for table, unit in BUCKETS.items():
                result = conn.sql(_query(files, unit)).to_arrow_table()
                assert result is not None
                rolled = result.cast(ROLLUP_SCHEMA)
                new = store.write_file(store.new_name(table, date, seq), rolled)
                changes[table] = (manifest.by_date(table).get(date, []), [new])
            if store.swap(changes, marks={f"rollup/{date}": mark}):
                done += 1
            else:
                store.discard(s for _old, new in changes.values() for s in new)
    finally:
        conn.close()
    return done
