"""The same host lands in the same cluster whatever path it came by (issue 13): a series without a
`cluster` label takes the cluster the catalog knows its host by (from an agent), a host never seen
the server's default; Kubernetes namespaces fill job teams the catalog does not know yet. Real
catalog (SQLite), real Arrow tables through the commit hook."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from simulator.maker.batches import gpu_batch
from tests.warehouse.test_prometheus_remote_write import DATA, Clock, page_series, rows_of
from warehouse import catalog
from warehouse.catalog.fleet import HostClusters, HostSeen, Job, jobs, record_hosts, upsert_jobs
from warehouse.prometheus.remote_write import Assembler
from warehouse.storage.catalog_sync import CatalogSync
from warehouse.storage.writer import Commit

T0_MS = 1_740_960_000_000


def test_an_unlabelled_remote_write_series_joins_its_hosts_agent_cluster(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    engine = catalog.connect(f"sqlite:///{tmp_path / 'c.sqlite'}")
    seen = datetime(2025, 3, 3, tzinfo=UTC)
    page = (DATA / "v100_legacy.prom").read_text()
    series = page_series(page, T0_MS)
    host = {s.labels.get("Hostname") for s in series} - {None}
    (name,) = host
    with engine.begin() as conn:
        record_hosts(conn, [HostSeen(name, "prod-eu", seen, seen)])
    assembler = Assembler(
        default_cluster="default", hold_s=60.0, clock=Clock(), known_cluster=HostClusters(engine)
    )
    assembler.add(series)
    assert {r["cluster"] for r in rows_of(assembler.take(everything=True))} == {"prod-eu"}
    stranger = Assembler(default_cluster="default", hold_s=60.0, clock=Clock())
    stranger.add(page_series(page, T0_MS))
    assert {r["cluster"] for r in rows_of(stranger.take(everything=True))} == {"default"}


def test_a_namespace_fills_the_team_only_where_nothing_better_is_known(tmp_path: Path) -> None:
    engine = catalog.connect(f"sqlite:///{tmp_path / 'c.sqlite'}")
    with engine.begin() as conn:
        upsert_jobs(conn, [Job("ml/known", team="search")])
    batch = gpu_batch("h1", timestamps=2)
    n = batch.num_rows
    import pyarrow as pa

    ids = ["ml/known" if i % 2 else "ml/new" for i in range(n)]
    batch = batch.set_column(batch.schema.get_field_index("job_id"), "job_id", pa.array(ids))
    batch = batch.set_column(
        batch.schema.get_field_index("namespace"), "namespace", pa.array(["ml"] * n)
    )
    CatalogSync(engine)(Commit(1, {"gpu_samples": batch}, []))
    with engine.connect() as conn:
        teams = dict(conn.execute(select(jobs.c.job_id, jobs.c.team)).all())
    assert teams == {"ml/known": "search", "ml/new": "ml"}
