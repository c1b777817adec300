"""Fleet gateways: standard Iceberg v2 tables on S3, exactly-once across gateways, pruned reads."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fleetscope.settings import Settings
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN, post_batch
from tests.fleet.conftest import landed, s3_filesystem
from warehouse.fleet import reader
from warehouse.fleet.gateway import Gateway
from warehouse.fleet.tables import FleetConfig

DAY_MS = 86_400_000


def test_tables_are_iceberg_v2_partitioned_by_day_and_cluster_with_files_sorted_by_time(
    gateways: list[Gateway],
) -> None:
    gw = gateways[0]
    for n, (cluster, day) in enumerate([("east", 0), ("east", 1), ("west", 0)]):
        batch = gpu_batch("node-1", start_ms=EPOCH_MS + day * DAY_MS, cluster=cluster, seed=n)
        batch = batch.take(pa.array(list(reversed(range(batch.num_rows)))))  # newest first
        answer = post_batch(gw.url, "gpu_samples", batch, token=TEST_TOKEN, batch_id=f"b{n}")
        assert answer.status == 202, answer.body

    landed(*gateways)
    table = gw.writer.tables.table("gpu_samples")
    table.refresh()
    assert table.metadata.format_version == 2
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [
        ("ts_day", "day"),
        ("cluster", "identity"),
    ]
    assert [
        (table.schema().find_column_name(f.source_id), str(f.direction))
        for f in table.sort_order().fields
    ] == [("ts", "ASC")]
    day0 = datetime.fromtimestamp(EPOCH_MS / 1000, UTC).date()
    paths = sorted(t.file.file_path for t in table.scan().plan_files())
    assert [p.split("/data/")[1].rsplit("/", 1)[0] for p in paths] == [
        f"ts_day={day0}/cluster=east",
        f"ts_day={day0}/cluster=west",
        f"ts_day={day0 + timedelta(days=1)}/cluster=east",
    ]
    assert all(
        p.startswith("s3://fleetscope-test/warehouse/fleetscope/gpu_samples/") for p in paths
    )
    fs = s3_filesystem(gw.config)
    for path in paths:  # any Parquet reader sees the files as they are, sorted by time
        ts = pq.read_table(path.removeprefix("s3://"), filesystem=fs).column("ts").to_pylist()
        assert ts == sorted(ts) and len(ts) == 80


def test_a_retry_on_another_gateway_is_stored_once_and_answered_duplicate_once_staged(
    gateways: list[Gateway],
) -> None:
    """A gets the batch, B its retry: if A's log was flushed by then, B answers duplicate; if
    not, B logs it too (202) and the flush that stages it second drops its copy (the ledger row
    is inserted once). Either way it is stored once, and once staged any retry is a duplicate."""
    a, b = gateways
    batch = gpu_batch("node-7", timestamps=5)
    first = post_batch(a.url, "gpu_samples", batch, token=TEST_TOKEN, batch_id="same-id")
    early = post_batch(b.url, "gpu_samples", batch, token=TEST_TOKEN, batch_id="same-id")
    assert (first.status, first.body["duplicate"], early.status) == (202, False, 202)
    landed(a, b)
    late = post_batch(b.url, "gpu_samples", batch, token=TEST_TOKEN, batch_id="same-id")
    assert (late.status, late.body["duplicate"]) == (202, True)
    start = datetime.fromtimestamp(EPOCH_MS / 1000, UTC)
    rows, _ = reader.scan(b.writer.tables, "gpu_samples", start, start + timedelta(hours=1))
    assert rows.num_rows == 40
    dropped = a.writer.retries_dropped + b.writer.retries_dropped
    assert dropped + int(early.body["duplicate"]) == 1


def test_a_reused_batch_id_with_other_content_is_refused_409_on_any_gateway(
    gateways: list[Gateway],
) -> None:
    a, b = gateways
    first = gpu_batch("node-8", timestamps=3)
    other = gpu_batch("node-8", start_ms=EPOCH_MS + 60_000, timestamps=3)
    stored = post_batch(a.url, "gpu_samples", first, token=TEST_TOKEN, batch_id="reused-id")
    landed(a)  # in the shared ledger once staged
    changed = post_batch(b.url, "gpu_samples", other, token=TEST_TOKEN, batch_id="reused-id")
    same = post_batch(b.url, "gpu_samples", first, token=TEST_TOKEN, batch_id="reused-id")
    assert (stored.status, changed.status, same.status) == (202, 409, 202)
    assert "already stored with other content" in str(changed.body["error"])
    assert same.body["duplicate"] is True
    start = datetime.fromtimestamp(EPOCH_MS / 1000, UTC)
    rows, _ = reader.scan(b.writer.tables, "gpu_samples", start, start + timedelta(hours=1))
    assert rows.num_rows == 24  # the first copy only


def test_a_scan_reads_only_the_files_of_its_partition(gateways: list[Gateway]) -> None:
    gw = gateways[0]
    for day in range(3):
        for cluster in ("east", "west"):
            batch = gpu_batch("n", start_ms=EPOCH_MS + day * DAY_MS, cluster=cluster)
            assert post_batch(gw.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
    landed(*gateways)
    start = datetime.fromtimestamp(EPOCH_MS / 1000, UTC) + timedelta(days=1)
    rows, stats = reader.scan(
        gw.writer.tables, "gpu_samples", start, start + timedelta(days=1), ["west"]
    )
    assert (stats.files, rows.num_rows) == (1, 80)
    assert set(rows.column("cluster").to_pylist()) == {"west"}
    assert rows.schema == gpu_batch("n").schema


def test_fleet_mode_refuses_a_catalog_that_is_not_postgresql(fleet_settings: Settings) -> None:
    from fleetscope.errors import ConfigError

    with pytest.raises(ConfigError, match=r"fleet mode needs warehouse\.catalog_url on PostgreSQL"):
        FleetConfig.from_settings(fleet_settings.with_overrides(warehouse__catalog_url=""))


def test_an_agents_poll_on_one_gateway_is_seen_by_another(gateways: list[Gateway]) -> None:
    import json
    import urllib.request

    a, b = gateways
    body = {"host": "gpu-1", "processes": [{"pid": 4242, "job_id": "train-7", "rank": 0}]}
    request = urllib.request.Request(
        a.url + "/v1/agent/poll",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {TEST_TOKEN}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        assert resp.status == 200
    (seen,) = b.profiling.registry.recent(0.0)
    assert (seen.host, [(p.pid, p.job_id, p.rank) for p in seen.processes]) == (
        "gpu-1",
        [(4242, "train-7", 0)],
    )
    assert b.profiling.registry.reports_job("train-7", 0.0)


def test_the_cli_queries_fleet_tables_with_the_same_sql(
    gateways: list[Gateway], fleet_settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    from app.cli import main

    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    batch = gpu_batch("node-cli", start_ms=now_ms - 60_000, timestamps=3)
    assert post_batch(gateways[0].url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
    # Readers see staged rows after the gateway's next log flush (1 s, docs/fleet.md), not at
    # the 202: flushed now, so a busy machine's late flush cannot leave the query empty.
    gateways[0].writer.flush_log_now()
    toml = fleet_settings.raw("core.data_dir")
    config = f"{toml}/fleetscope.toml"
    sections: dict[str, list[str]] = {}
    for key in ("server.mode", "warehouse.catalog_url", "fleet.warehouse_uri",
                "fleet.s3_endpoint", "fleet.s3_access_key", "fleet.s3_secret_key"):  # fmt: skip
        section, name = key.split(".")
        sections.setdefault(section, []).append(f'{name} = "{fleet_settings.raw(key)}"')
    with open(config, "w") as out:
        for section, lines in sections.items():
            out.write(f"[{section}]\n" + "\n".join(lines) + "\n")
    sql = "SELECT host, count(*) AS n FROM gpu_samples GROUP BY host"
    assert main(["--config", config, "warehouse", "query", sql, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"host": "node-cli", "n": "24"}]


def test_gateways_record_hosts_and_gpu_allocations_as_the_embedded_server(
    gateways: list[Gateway],
) -> None:
    """The catalog's hosts and GPU allocations (what the dashboard's job list and the profiling
    service's "known job" read) come from every gateway's commits."""
    from warehouse.catalog import fleet as catalog_fleet

    for n, gw in enumerate(gateways):
        batch = gpu_batch(f"node-{n}", timestamps=3, gpus=2, job_id=f"job-{n}", cluster="east")
        assert post_batch(gw.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
    landed(*gateways)  # the hooks run on staged rows, off the ack path
    with gateways[0].catalog.connect() as conn:
        hosts = sorted(h.host for h in catalog_fleet.list_hosts(conn))
        allocated = sorted((a.job_id, a.host, a.gpu_index) for a in catalog_fleet.allocations(conn))
    assert hosts == ["node-0", "node-1"]
    assert allocated == [("job-0", "node-0", 0), ("job-0", "node-0", 1),
                         ("job-1", "node-1", 0), ("job-1", "node-1", 1)]  # fmt: skip
    assert gateways[1].profiling.create("job-0") >= 1  # a job only gateway 0 saw is known
