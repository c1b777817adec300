"""One committer per table (issue 27) on a real PostgreSQL and S3 server: gateways stage data files,
the holder of a table's commit lock appends every gateway's staged files in one commit, and a
committer `kill -9`'d mid-commit is replaced by one that commits each staged file exactly once."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta

from sqlalchemy import create_engine

from fleetscope.settings import Settings
from simulator.maker.batches import EPOCH_MS, gpu_batch
from simulator.wire import TEST_TOKEN, post_batch
from tests.fleet.conftest import wait_until
from warehouse.catalog import staging
from warehouse.fleet import reader
from warehouse.fleet.commit_lock import CommitterLease, lock_key
from warehouse.fleet.gateway import Gateway
from warehouse.fleet.tables import FLUSH_PROPERTY

START = datetime.fromtimestamp(EPOCH_MS / 1000, UTC)


def waiting(gw: Gateway) -> int:
    with gw.catalog.connect() as conn:
        return staging.waiting(conn, "gpu_samples")


def snapshots(gw: Gateway) -> list[str]:
    table = gw.writer.tables.table("gpu_samples")
    table.refresh()
    return [str(s.summary.get(FLUSH_PROPERTY)) for s in table.snapshots() if s.summary]


def test_staged_rows_are_readable_at_once_and_one_commit_appends_every_gateways_files(
    gateways: list[Gateway],
) -> None:
    for n, gw in enumerate(gateways):
        batch = gpu_batch(f"node-{n}", timestamps=3)
        assert post_batch(gw.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
        gw.writer.flush_log_now()
    assert waiting(gateways[0]) == 2  # one file per gateway, none committed
    rows, _ = reader.scan(gateways[0].writer.tables, "gpu_samples", START, START + timedelta(1))
    assert rows.num_rows == 2 * 24  # read from the staged files

    committed = [gw.committer.run_once() for gw in gateways]
    assert sorted(committed) == [0, 2]  # the lock holder commits both gateways' files
    assert waiting(gateways[0]) == 0
    assert len(snapshots(gateways[0])) == 1  # in one append
    rows, _ = reader.scan(gateways[1].writer.tables, "gpu_samples", START, START + timedelta(1))
    assert rows.num_rows == 2 * 24  # each row once: committed files are not read again
    assert sum(gw.committer.stats.conflicts for gw in gateways) == 0


DEAD_COMMITTER = """
import sys, time
from sqlalchemy import create_engine
from fleetscope.settings import load_settings
from warehouse.catalog import staging
from warehouse.fleet.committer import TableCommitter
from warehouse.fleet.tables import FleetConfig, FleetTables

settings = load_settings(env={}).with_overrides(**dict(a.split("=", 1) for a in sys.argv[1:]))
engine = create_engine(settings.warehouse.catalog_url)
tables = FleetTables(FleetConfig.from_settings(settings))
committer = TableCommitter(tables, engine, interval_s=3600)
assert committer.lease.hold("gpu_samples")
with engine.begin() as conn:  # step 2, then 3: appended, never marked
    paths = staging.assign(conn, "gpu_samples", "landed-commit", 100)
table = tables.table("gpu_samples")
table.refresh()
committer._append("gpu_samples", table, paths, "landed-commit")
print("appended", len(paths), flush=True)
sys.stdin.readline()
with engine.begin() as conn:  # step 2 only: assigned, never appended
    paths = staging.assign(conn, "gpu_samples", "lost-commit", 100)
print("assigned", len(paths), flush=True)
time.sleep(600)
"""


def test_a_committer_killed_mid_commit_is_taken_over_and_each_staged_file_lands_once(
    gateways: list[Gateway], fleet_settings: Settings
) -> None:
    a, b = gateways
    keys = ("warehouse.catalog_url", "fleet.warehouse_uri", "fleet.s3_endpoint",
            "fleet.s3_access_key", "fleet.s3_secret_key")  # fmt: skip
    overrides = [f"{key}={fleet_settings.raw(key)}" for key in keys]
    args = [o.replace(".", "__", 1) for o in overrides]

    def send(gw: Gateway, host: str) -> None:
        batch = gpu_batch(host, timestamps=2)
        assert post_batch(gw.url, "gpu_samples", batch, token=TEST_TOKEN).status == 202
        gw.writer.flush_log_now()

    send(a, "before-1")
    send(b, "before-2")
    proc = subprocess.Popen(
        [sys.executable, "-c", DEAD_COMMITTER, *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().split() == ["appended", "2"]
        assert [g.committer.run_once() for g in gateways] == [0, 0]  # it holds the lock
        send(a, "after-1")
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.stdout.readline().split() == ["assigned", "1"]
        proc.kill()  # kill -9 mid-commit: one commit landed unmarked, one assigned unappended
        proc.wait()
        wait_until(lambda: a.committer.run_once() > 0, 60, "the dead committer's lock taken over")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()
    assert waiting(a) == 0
    assert a.committer.stats.recovered == 2  # the landed commit marked, the lost one re-staged
    carried = snapshots(a)
    assert carried.count("landed-commit") == 1 and "lost-commit" not in carried
    table = a.writer.tables.table("gpu_samples")
    paths = [t.file.file_path for t in table.scan().plan_files()]
    assert len(paths) == len(set(paths)) == 3  # each staged file committed exactly once
    rows, _ = reader.scan(a.writer.tables, "gpu_samples", START, START + timedelta(1))
    assert rows.num_rows == 3 * 16
    assert a.committer.stats.conflicts == 0


def test_lease_one_holder_per_table_released_when_the_holder_dies(pg_url: str) -> None:
    engine = create_engine(pg_url)
    mine, other = CommitterLease(engine), CommitterLease(engine)
    assert mine.hold("t1") and mine.hold("t1")
    assert not other.hold("t1")
    assert other.hold("t2")  # another table's committer may be another gateway
    mine.release_all()
    assert other.hold("t1")
    other.release_all()
    engine.dispose()


def test_lock_keys_are_stable_and_distinct_per_table() -> None:
    assert lock_key("fleetscope.gpu_samples") == lock_key("fleetscope.gpu_samples")
    assert lock_key("fleetscope.gpu_samples") != lock_key("fleetscope.host_samples")
    assert -(2**63) <= lock_key("x") < 2**63
