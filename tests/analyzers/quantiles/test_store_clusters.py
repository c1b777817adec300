"""The sketch store kept per cluster (fleet mode cuts a scheduled window per cluster, each part
reading one cluster's rows): the parts' panes add up to the whole fleet's, each pane once,
whether the store was kept whole before, and a part's rebuild replaces its own cluster's rows."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from analyzers.accounting.frames import FrameParams
from analyzers.quantiles.tiers import PANES, QuantileStore, group_sketches
from analyzers.run.parts import WHOLE, Scope
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from simulator.maker.series import T0, Fleet
from tests.analyzers.quantiles.test_store import CATALOG, exact, rows, same, util

CLUSTER_OF_HOST = {"h1": "east", "h2": "west", "h3": None}  # h3's rows carry no cluster


@pytest.fixture
def fleet() -> Fleet:
    fleet = Fleet()
    fleet.gpus("a", "h1", range(2), 0, 150, gpu_util=util)
    fleet.gpus("b", "h2", range(1), 20, 100, gpu_util=lambda i, t: 10.0 + i % 3)
    fleet.gpus(None, "h3", range(1), 0, 150, gpu_util=0.0)
    fleet.host("h1", 0, 150, job="a")
    for row in [*fleet.gpu_rows, *fleet.host_rows]:
        row["cluster"] = CLUSTER_OF_HOST[row["host"]]
    return fleet


def part_conn(fleet: Fleet, cluster: Scope) -> duckdb.DuckDBPyConnection:
    """What a part's read holds: one cluster's rows (None: those without a cluster)."""
    conn = fleet.connect()
    if cluster is not WHOLE:
        for table in ("gpu_samples", "host_samples", "step_samples"):
            conn.execute(f"DELETE FROM {table} WHERE cluster IS DISTINCT FROM ?", [cluster])
    return conn


def keep(store: QuantileStore, fleet: Fleet, window: Window, cluster: Scope) -> None:
    """One cluster's part keeps its panes, or WHOLE: one read of every cluster (embedded)."""
    pipeline = Pipeline((), FrameParams(), store)
    conn = part_conn(fleet, cluster)
    try:
        if cluster is WHOLE:
            assert pipeline.run(conn, window, CATALOG).errors == {}
        else:
            assert pipeline.run_part(conn, window, CATALOG, cluster).errors == {}
    finally:
        conn.close()


def assert_whole_fleet_once(store: QuantileStore, fleet: Fleet) -> None:
    two_hours = sum(r["ts"] < T0 + timedelta(hours=2) for r in fleet.gpu_rows)
    samples = len(fleet.gpu_rows)
    assert rows(store, PANES) == [(10, samples), (60, samples), (3600, two_hours)]
    conn = store.connect()
    (fleet_sketch,) = group_sketches(conn, "gpu_util_pct", [], T0, T0 + timedelta(hours=3)).values()
    assert same(fleet_sketch, exact(fleet, 0, 180))
    by_cluster = group_sketches(conn, "gpu_util_pct", ["cluster"], T0, T0 + timedelta(hours=3))
    assert set(by_cluster) == {("east",), ("west",), (None,)}
    assert same(by_cluster["west",], exact(fleet, 0, 180, "b"))
    conn.close()


def test_parts_per_cluster_and_slice_keep_the_whole_fleets_panes_once(
    fleet: Fleet, tmp_path: Path
) -> None:
    store = QuantileStore(tmp_path / "sketches")
    for end_min in (50, 95, 150):  # the scheduler's ticks through one bucket
        for cluster in ("east", "west", None):
            for partition in (0, 1):
                keep(
                    store, fleet, Window(T0, T0 + timedelta(minutes=end_min), partition, 2), cluster
                )
    assert_whole_fleet_once(store, fleet)


def test_a_store_kept_whole_goes_on_per_cluster_from_its_marks(
    fleet: Fleet, tmp_path: Path
) -> None:
    """A fleet deployment upgraded mid-bucket: its slice's marks covered every cluster."""
    store = QuantileStore(tmp_path / "sketches")
    keep(store, fleet, Window(T0, T0 + timedelta(minutes=50)), WHOLE)
    for end_min in (95, 150):
        for cluster in ("east", "west", None):
            keep(store, fleet, Window(T0, T0 + timedelta(minutes=end_min)), cluster)
    assert_whole_fleet_once(store, fleet)


def test_a_rebuild_of_one_clusters_part_replaces_its_rows_only(
    fleet: Fleet, tmp_path: Path
) -> None:
    store = QuantileStore(tmp_path / "sketches")
    for cluster in ("east", "west", None):
        keep(store, fleet, Window(T0, T0 + timedelta(minutes=150)), cluster)
    for cluster in ("west", "east", None, "west"):  # behind the marks: a rebuild each
        keep(store, fleet, Window(T0, T0 + timedelta(minutes=60)), cluster)
    assert_whole_fleet_once(store, fleet)
