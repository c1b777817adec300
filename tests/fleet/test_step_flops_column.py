"""Fleet mode and contract schema version 2: an Iceberg step_samples table made by an older build
(no flops_per_step, no compute_dtype) gains the columns when a newer gateway opens it; its old
rows read them as null, and the new rows keep their FLOPs (real Iceberg on PostgreSQL and S3)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa

from collector.sdk.receiver import steps_table
from fleetscope.contract import STEP_SAMPLES
from fleetscope.settings import Settings
from warehouse.fleet import reader
from warehouse.fleet.tables import FleetConfig, FleetTables, ensure_bucket

T0 = datetime(2026, 11, 2, tzinfo=UTC)
NEW = ("flops_per_step", "compute_dtype")


def _steps(job: str, n: int, **extra: object) -> pa.Table:
    rows = [
        {"pid": 7, "job_id": job, "rank": 0, "step": i, "ts": T0.timestamp() + i,
         "step_time_s": 1.0, **extra}
        for i in range(n)
    ]  # fmt: skip
    return steps_table(rows, host="node-a", cluster="c1")


def test_an_older_step_table_gains_the_flops_columns(fleet_settings: Settings) -> None:
    config = FleetConfig.from_settings(fleet_settings)
    ensure_bucket(config)
    old_schema = pa.schema([f for f in STEP_SAMPLES if f.name not in NEW])
    legacy = FleetTables(config)._load_or_create("step_samples", old_schema)
    legacy.append(_steps("old", 2).select(old_schema.names).cast(legacy.schema().as_arrow()))

    upgraded = FleetTables(config)  # a gateway of the newer build
    table = upgraded.table("step_samples")
    assert table.schema().column_names[-2:] == list(NEW)
    new = _steps("new", 2, flops_per_step=2e14, compute_dtype="bf16")
    table.append(new.cast(table.schema().as_arrow()))

    rows, _ = reader.scan(upgraded, "step_samples", T0, T0 + timedelta(hours=1))
    assert rows.schema == STEP_SAMPLES
    got = sorted(zip(*(rows.column(c).to_pylist() for c in ("job_id", *NEW)), strict=True))
    assert got == [("new", 2e14, "bf16")] * 2 + [("old", None, None)] * 2
