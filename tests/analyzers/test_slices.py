"""A window read in slices of whole hosts (analyzers.run.slices) lands exactly what one read of the
window lands: on a simulated multi-day fleet (every scenario the simulator has, host moves
included), every day bucket analysed both ways into its own real SQLite catalog, the stored
findings equal by id, rule, job, host, GPU-hours and evidence. Real DuckDB over real Parquet
segments, a real quantile-sketch store for the sliced run."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from analyzers.accounting.frames import FrameParams
from analyzers.base import StaticJobCatalog, load_analyzers
from analyzers.quantiles.tiers import QuantileStore
from analyzers.run.results import FindingStore
from analyzers.run.runner import Pipeline
from analyzers.run.schedule import backfill_windows
from analyzers.run.slices import host_slices, slice_cursor
from simulator.fleet import FleetSpec
from simulator.sim import FleetSimulator
from warehouse import catalog
from warehouse.read.reader import open_segments
from warehouse.storage import schema
from warehouse.storage.segments import SegmentStore

ORIGIN = 1_767_571_200  # 2026-01-05T00:00:00Z
DAYS = 2
HOSTS = 5
STEP_S = 120


@pytest.fixture(scope="module")
def segments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet") / "segments"
    sim = FleetSimulator(FleetSpec(hosts=HOSTS, seed=11), origin_s=ORIGIN, horizon_s=DAYS * 86400)
    store = SegmentStore(root)
    chunks = sim.iter_tables(ORIGIN, ORIGIN + DAYS * 86400, STEP_S, chunk_s=6 * 3600)
    for seq, chunk in enumerate(chunks, start=1):
        store.publish(seq, {n: store.write(n, t, seq) for n, t in chunk.items()})
    return root


def stored(store: FindingStore) -> list[tuple[Any, ...]]:
    """The stored findings; GPU-hours to 1e-9 h: DuckDB sums in parallel in no fixed order, so
    two reads of the same window, sliced or not, differ in the last bits of an unrounded sum
    (evidence is rounded by the rules and compared exactly)."""
    return sorted(
        (f.finding_id, f.rule_id, f.job_id, f.host, round(f.wasted_gpu_hours, 9), f.user,
         json.dumps(f.evidence, sort_keys=True))
        for f in (s.finding for s in store.findings())
    )  # fmt: skip


def analysed(pipeline: Pipeline, segments: Path, db: Path) -> list[tuple[Any, ...]]:
    store = FindingStore(catalog.connect(f"sqlite:///{db}"))
    start = datetime.fromtimestamp(ORIGIN, UTC)
    end = datetime.fromtimestamp(ORIGIN + DAYS * 86400, UTC)
    for window in backfill_windows(start, end, 86400):
        conn = open_segments(segments)
        try:
            assert pipeline.run(conn, window, StaticJobCatalog(), store).errors == {}
        finally:
            conn.close()
    return stored(store)


def test_slices_hold_whole_hosts_and_every_job_in_one_slice(segments: Path) -> None:
    conn = open_segments(segments)
    window = backfill_windows(
        datetime.fromtimestamp(ORIGIN, UTC), datetime.fromtimestamp(ORIGIN + 86400, UTC), 86400
    )[0]
    slices = host_slices(conn, window, 8)
    hosts = [h for s in slices for h in s]
    assert sorted(hosts) == hosts
    everyone = conn.execute("SELECT DISTINCT host FROM gpu_samples").fetchall()
    assert set(hosts) == {h for (h,) in everyone}
    assert len(slices) > 1
    for table in ("gpu_samples", "host_samples", "step_samples"):
        spread = conn.execute(
            f"SELECT job_id, list(DISTINCT host) FROM {table} WHERE job_id IS NOT NULL GROUP BY 1"
        ).fetchall()
        for job, job_hosts in spread:
            assert sum(1 for s in slices if set(job_hosts) & set(s)) == 1, (table, job)
    counts = [
        slice_cursor(conn, s).execute("SELECT count(*) FROM gpu_samples").fetchall()[0][0]
        for s in slices
    ]
    assert sum(counts) == conn.execute("SELECT count(*) FROM gpu_samples").fetchall()[0][0]


@pytest.mark.timeout(900)  # two passes over two days of every analyzer: minutes on a busy box
def test_a_window_read_in_host_slices_lands_what_one_read_lands(
    segments: Path, tmp_path: Path
) -> None:
    analyzers = tuple(load_analyzers())
    whole = Pipeline(analyzers, FrameParams(), QuantileStore(tmp_path / "sketches-whole"))
    sliced = Pipeline(analyzers, FrameParams(), QuantileStore(tmp_path / "sketches"), slice_gpus=8)
    one_read = analysed(whole, segments, tmp_path / "whole.sqlite")
    in_slices = analysed(sliced, segments, tmp_path / "sliced.sqlite")
    assert len(one_read) > 20
    assert {f[1] for f in one_read} >= {"R1", "R2", "R3"}
    assert in_slices == one_read
    # the sketches, built slice by slice and stored once, are the one read's rows
    assert sketch_differences(tmp_path / "sketches", tmp_path / "sketches-whole") == {
        "sketch_panes": [],
        "sketch_buckets": [],
    }
    conn = QuantileStore(tmp_path / "sketches-whole").connect()
    try:
        assert conn.execute("SELECT count(*) FROM sketch_buckets").fetchall()[0][0] > 0
    finally:
        conn.close()


# A pane's value sum to 1e-6 (DuckDB sums in no fixed order); every other column exactly, the
# top and bottom lists element by element.
CANONICAL = {
    "sketch_panes": "SELECT * REPLACE (round(value_sum, 6) AS value_sum) FROM {}",
    "sketch_buckets": "SELECT * FROM {}",
}


def sketch_differences(root: Path, other: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Per table, the stored pane and bucket rows that one store holds more often than the other
    (EXCEPT ALL both ways: equal multisets of rows give none), at most 10 of each side, marked
    with the store ("+" root, "-" other). In DuckDB, not Python: the two days hold about two
    million rows per store, and a sort of Python tuples of them was most of this test's time."""
    conn = QuantileStore(root).connect()
    theirs = QuantileStore(other).connect()
    try:
        found: dict[str, list[tuple[Any, ...]]] = {}
        for name, canonical in CANONICAL.items():
            conn.register("_other", theirs.sql(f"SELECT * FROM {name}").to_arrow_table())
            mine, their = canonical.format(name), canonical.format("_other")
            found[name] = [
                ("+", *row)
                for row in conn.execute(f"{mine} EXCEPT ALL {their} LIMIT 10").fetchall()
            ] + [
                ("-", *row)
                for row in conn.execute(f"{their} EXCEPT ALL {mine} LIMIT 10").fetchall()
            ]
            conn.unregister("_other")
        return found
    finally:
        theirs.close()
        conn.close()


def test_a_slice_of_the_writers_own_database_reads_through_a_cursor(
    segments: Path, tmp_path: Path
) -> None:
    """The embedded scheduler reads the server's DuckDB file through a cursor of the writer
    (warehouse.read.reader.Warehouse.cursor): its slices are cursors of that cursor."""
    from fleetscope.contract import TABLES

    writer = duckdb.connect(str(tmp_path / "telemetry.duckdb"))
    view = open_segments(segments)
    for name, table_schema in TABLES.items():
        writer.execute(schema.create_table_sql(name, table_schema))
        rows = view.sql(f"SELECT * FROM {name}").to_arrow_table()
        writer.register("_rows", rows)
        writer.execute(f"INSERT INTO {name} SELECT * FROM _rows")
        writer.unregister("_rows")
    view.close()
    cursor = writer.cursor()
    window = backfill_windows(
        datetime.fromtimestamp(ORIGIN, UTC), datetime.fromtimestamp(ORIGIN + 86400, UTC), 86400
    )[0]
    slices = host_slices(cursor, window, 8)
    assert len(slices) > 1
    total = cursor.execute("SELECT count(*) FROM host_samples").fetchall()[0][0]
    counts = [
        slice_cursor(cursor, s).execute("SELECT count(*) FROM host_samples").fetchall()[0][0]
        for s in slices
    ]
    assert sum(counts) == total > 0
