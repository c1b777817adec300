"""The fleet's quantile-sketch store (one Iceberg table on a real S3 server, catalog in a real
PostgreSQL) keeps exactly the rows the local store keeps, run by run: the same keeps on both give
the same sketch_panes and sketch_buckets, the same marks, through incremental ticks, hash slices,
per-cluster parts, rebuilds behind the marks (late data) and retention counted back from the
newest sample, including a window without samples that expires nothing."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from analyzers.accounting.frames import FrameParams
from analyzers.quantiles.fleet_store import TABLE, FleetSketchStore
from analyzers.quantiles.store import SketchStore
from analyzers.quantiles.store_rows import Kept
from analyzers.quantiles.tiers import QuantileStore
from analyzers.run.parts import WHOLE, Scope
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from fleetscope.settings import Settings
from simulator.maker.series import T0, Fleet
from tests.analyzers.quantiles.test_store import CATALOG, util
from tests.analyzers.quantiles.test_store_clusters import CLUSTER_OF_HOST, part_conn
from warehouse.fleet.tables import FleetConfig, FleetTables, ensure_bucket

pytestmark = pytest.mark.slow

Retention = dict[int, float | None]
# A sample every 30 s, not the simulator's 10 s: a third of the rows and panes to keep, commit
# and compare (the dumps and keeps are most of this file's time), and still several samples in
# every minute and hour pane, and 10 s panes with gaps between them.
EVERY_S = 30.0


def mixed_fleet(late: bool = True) -> Fleet:
    """Three hosts in two clusters and none; `late=False`: job b's rows from minute 40 on are
    still to come (a spool replayed later)."""
    fleet = Fleet()
    fleet.gpus("a", "h1", range(2), 0, 150, EVERY_S, gpu_util=util)
    fleet.gpus(
        "b", "h2", range(1), 20, 100 if late else 20, EVERY_S, gpu_util=lambda i, t: 10.0 + i % 3
    )
    fleet.gpus(None, "h3", range(1), 0, 150, EVERY_S, gpu_util=0.0)
    fleet.host("h1", 0, 150, job="a", interval_s=EVERY_S)
    for row in [*fleet.gpu_rows, *fleet.host_rows]:
        row["cluster"] = CLUSTER_OF_HOST[row["host"]]
    return fleet


def later_day() -> Fleet:
    fleet = Fleet()
    fleet.gpus("a", "h1", range(1), 0, 30, gpu_util=util)
    fleet.gpus("a", "h1", range(1), 2 * 1440, 90, gpu_util=util)
    return fleet


def minutes(start: float, end: float, p: int = 0, n: int = 1) -> Window:
    return Window(T0 + timedelta(minutes=start), T0 + timedelta(minutes=end), p, n)


Step = tuple[Callable[[], Fleet], Window, Scope]
FULL, PARTIAL = (lambda: mixed_fleet()), (lambda: mixed_fleet(late=False))
SCENARIOS: dict[str, tuple[Retention, list[Step]]] = {
    "ticks through a bucket": ({}, [(FULL, minutes(0, m), WHOLE) for m in (50, 50, 95, 150)]),
    "hash slices, then rebuilds of each": (
        {},
        [(FULL, minutes(0, 150, p, 2), WHOLE) for p in (0, 1)]
        + [(FULL, minutes(0, 60, p, 2), WHOLE) for p in (1, 0, 1)],
    ),
    "late rows rebuild behind the marks": (
        {},
        [
            (PARTIAL, minutes(0, 150), WHOLE),
            (FULL, minutes(0, 60), WHOLE),
            (FULL, minutes(60, 120), WHOLE),
        ],
    ),
    "parts per cluster, then a rebuild of each": (
        {},
        [(FULL, minutes(0, m), c) for m in (50, 150) for c in ("east", "west", None)]
        + [(FULL, minutes(0, 60), c) for c in ("west", "east", None)],
    ),
    "retention from the newest sample; none: nothing expires": (
        {10: 3600.0, 60: 3600.0},
        [
            (FULL, minutes(0, 1440), WHOLE),
            (later_day, minutes(2 * 1440, 3 * 1440), WHOLE),
            (later_day, minutes(5 * 1440, 5 * 1440 + 60), WHOLE),
        ],
    ),
}


def dump(store: SketchStore, **span: Any) -> dict[str, list[tuple[Any, ...]]]:
    conn = store.connect(**span)
    try:
        return {
            name: conn.execute(f"SELECT * FROM {name} ORDER BY ALL").fetchall()
            for name in ("sketch_panes", "sketch_buckets")
        }
    finally:
        conn.close()


def keep(store: SketchStore, fleet: Fleet, window: Window, cluster: Scope) -> Kept:
    pipeline = Pipeline((), FrameParams(), store)
    conn = part_conn(fleet, cluster)
    try:
        assert store.keep(conn, window, CATALOG, cluster) is not None  # the runner's call, alone
        result = (
            pipeline.run(conn, window, CATALOG)
            if cluster is WHOLE
            else pipeline.run_part(conn, window, CATALOG, cluster)
        )
        assert not result.errors
        return store.keep(conn, window, CATALOG, cluster)  # a third keep adds nothing
    finally:
        conn.close()


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_fleet_store_keeps_what_the_local_store_keeps(
    scenario: str, fleet_settings: Settings, tmp_path: Path
) -> None:
    retention, steps = SCENARIOS[scenario]
    config = FleetConfig.from_settings(fleet_settings)
    ensure_bucket(config)
    local = QuantileStore(tmp_path / "local-sketches", retention_s=retention)
    fleet = FleetSketchStore(config, retention_s=retention)
    assert not fleet.has_rows() and dump(fleet)["sketch_buckets"] == []  # no table yet: empty
    for n, (make, window, cluster) in enumerate(steps):
        data = make()
        kept_local = keep(local, data, window, cluster)
        kept_fleet = keep(fleet, data, window, cluster)
        assert kept_fleet == kept_local, n
        assert dump(fleet) == dump(local), n
    assert fleet.has_rows()
    # a range read prunes the scan to the panes starting inside it, and loses none of them
    start, end = T0 + timedelta(minutes=30), T0 + timedelta(minutes=90)
    ranged = dump(fleet, start=start, end=end)
    assert ranged == {
        name: [row for row in rows if start <= row[0] < end] for name, rows in dump(fleet).items()
    }
    # what another machine sees: a store opened afresh from the settings alone
    assert dump(FleetSketchStore.from_settings(fleet_settings.with_overrides(
        analyzers__sketch_pane_retention_s=retention.get(10) or 0.0,
        analyzers__sketch_minute_retention_s=retention.get(60) or 0.0,
    ))) == dump(local)  # fmt: skip


def test_a_duplicate_keep_of_one_part_that_commits_second_adds_nothing(
    fleet_settings: Settings,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A part's task delivered twice (Celery's late ack after a lost worker): both build from the
    same marks, the first commits, and the second, finding the marks moved on its commit, adds
    nothing (its data files are left to the orphan sweep)."""
    from analyzers.quantiles import fleet_store, store_rows

    config = FleetConfig.from_settings(fleet_settings)
    ensure_bucket(config)
    data, window = mixed_fleet(), minutes(0, 150)
    build = store_rows.tier_rows  # the builds `store_rows.built_slices` makes
    raced: list[Kept] = []
    racing_now: list[bool] = []

    def racing(*args: Any) -> Any:
        if not racing_now:  # the duplicate runs to its commit while this keep is building
            racing_now.append(True)
            conn = part_conn(data, "east")
            try:
                raced.append(FleetSketchStore(config).keep(conn, window, CATALOG, "east"))
            finally:
                conn.close()
        return build(*args)

    monkeypatch.setattr(store_rows, "tier_rows", racing)
    conn = part_conn(data, "east")
    try:
        second = FleetSketchStore(config).keep(conn, window, CATALOG, "east")
    finally:
        conn.close()
    local = QuantileStore(tmp_path / "local-sketches")
    conn = part_conn(data, "east")
    try:
        once = local.keep(conn, window, CATALOG, "east")
    finally:
        conn.close()
    assert raced == [once] and second.marks == once.marks
    assert "kept by another run first" in caplog.text
    assert dump(FleetSketchStore(config)) == dump(local)
    table = FleetTables(config).existing(TABLE)
    assert table is not None
    assert {k for k in table.properties if k.startswith(fleet_store.MARKS)} == {
        f"{fleet_store.MARKS}0/1@east/{res}s" for res in (10, 60, 3600)
    }  # the marks live in the table's properties, set by the commit that added the panes
