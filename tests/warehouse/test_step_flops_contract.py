"""Contract schema version 2 (step FLOPs for measured MFU): a new agent's steps keep their FLOPs
and dtype end to end; an older agent (version 1, no such columns) is still accepted, its steps
null there; segments written before the columns existed read them as null, and compact."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from collector.sdk.receiver import steps_table
from fleetscope.contract import HEADER_SCHEMA_VERSION, STEP_SAMPLES, to_ipc
from simulator.wire import TEST_TOKEN as TOKEN
from simulator.wire import headers_for, post_batch
from tests.readable import eventually
from tests.warehouse.test_ingest_http import raw_post
from warehouse.ingest.runtime import Server
from warehouse.read import reader
from warehouse.storage.compaction import compact
from warehouse.storage.segments import SegmentStore

T0 = datetime(2026, 11, 2, tzinfo=UTC).timestamp()


def _steps(job: str, n: int, **extra: object) -> pa.Table:
    rows = [
        {"pid": 7, "job_id": job, "rank": 0, "step": i, "ts": T0 + i, "step_time_s": 1.0, **extra}
        for i in range(n)
    ]
    return steps_table(rows, host="node-a", cluster="c1")


def test_a_new_agents_flops_and_an_old_agents_steps_are_both_stored(server: Server) -> None:
    new = _steps("new", 3, flops_per_step=4.2e14, compute_dtype="bf16")
    assert post_batch(server.url, "step_samples", new, token=TOKEN).status == 202
    # an agent built before version 2: its schema has no FLOPs columns, its header says 1
    old = _steps("old", 2).drop_columns(["flops_per_step", "compute_dtype"])
    headers = {**headers_for("old-agent-1", TOKEN), HEADER_SCHEMA_VERSION: "1"}
    answer = raw_post(server.url, "/v1/batches/step_samples", to_ipc(old), headers)
    assert answer.status == 202
    expected = [("new", 3, 4.2e14, "bf16"), ("old", 2, None, None)]

    def stored() -> list[tuple[object, ...]]:
        return (
            reader.connect(server.settings)
            .execute(
                "SELECT job_id, count(*), any_value(flops_per_step), any_value(compute_dtype) "
                "FROM step_samples GROUP BY job_id ORDER BY job_id"
            )
            .fetchall()
        )

    assert eventually(stored, expected) == expected  # readable after the log's next flush


def test_segments_from_before_version_2_read_and_compact_with_null_flops(tmp_path: Path) -> None:
    store = SegmentStore(tmp_path)
    old_schema = pa.schema(
        [f for f in STEP_SAMPLES if f.name not in ("flops_per_step", "compute_dtype")]
    )
    old = _steps("old", 2).select(old_schema.names)
    new = _steps("new", 2, flops_per_step=1e12, compute_dtype="fp16")
    store.publish(1, {"step_samples": store.write("step_samples", old, 1)})
    store.publish(2, {"step_samples": store.write("step_samples", new, 2)})
    query = "SELECT job_id, flops_per_step, compute_dtype FROM step_samples ORDER BY job_id, ts"
    expected = [
        ("new", 1e12, "fp16"),
        ("new", 1e12, "fp16"),
        ("old", None, None),
        ("old", None, None),
    ]
    assert reader.open_segments(tmp_path).execute(query).fetchall() == expected
    assert compact(store, 1 << 30) >= 1
    assert len(store.snapshot().live("step_samples")) == 1
    assert reader.open_segments(tmp_path).execute(query).fetchall() == expected
