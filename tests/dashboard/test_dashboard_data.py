"""The dashboard's numbers, checked against the known truth of the test warehouse (conftest)."""

from __future__ import annotations

from dataclasses import astuple
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from analyzers.run.results import FindingStore
from dashboard import data, opportunities, source
from fleetscope.settings import load_settings
from simulator.maker.jobs import Fleet, Job, write_segments
from tests.dashboard.conftest import START, Warehouse
from warehouse.catalog import connect
from warehouse.catalog.findings import Finding as CatalogFinding
from warehouse.catalog.findings import upsert_findings
from warehouse.profiling.trace_backend import trace_storage, traces_dir

WEEK = timedelta(days=7)


@pytest.fixture(scope="module")
def buckets(warehouse: Warehouse) -> pd.DataFrame:
    con = source.connect_segments(warehouse.data_dir / "segments")
    window = data.window_ending(con, WEEK)
    assert window is not None
    return data.gpu_buckets(con, window, default_interval_s=10.0)


def test_window_ends_just_after_the_newest_sample(warehouse: Warehouse) -> None:
    con = source.connect_segments(warehouse.data_dir / "segments")
    newest = START + timedelta(seconds=7200 - 60)
    assert data.latest_sample(con) == newest
    window = data.window_ending(con, WEEK)
    # A week of hourly buckets, its start rounded down to a whole hour.
    assert window == data.Window(
        START + timedelta(hours=1) - WEEK, newest + timedelta(milliseconds=1), bucket_s=3600
    )


def test_fleet_totals_follow_the_shared_accounting(buckets: pd.DataFrame) -> None:
    totals = data.fleet_totals(buckets)
    assert totals.capacity_h == pytest.approx(12.0)
    assert totals.allocated_h == pytest.approx(8.0)
    assert totals.active_h == pytest.approx(3.6 + 0.0 + 1.35)
    assert totals.sm_h == pytest.approx(4 * 0.7 + 3 * 0.3)
    assert totals.idle_h == pytest.approx(8.0 - 4.95)
    assert totals.active_pct == pytest.approx(100 * 4.95 / 8.0)
    assert (totals.gpus, totals.jobs) == (6, 3)
    assert set(buckets["interval_s"]) == {60.0}


def test_idlest_jobs_rank_by_idle_gpu_hours(buckets: pd.DataFrame, warehouse: Warehouse) -> None:
    meta = data.jobs_meta(source.catalog_engine(load_settings(env=warehouse.env)))
    jobs = data.job_efficiency(buckets, meta)
    assert jobs["job_id"].tolist() == ["stall-1", "idle-1", "train-ok"]
    stall = jobs.iloc[0]
    assert (stall["gpus"], stall["hosts"], stall["user"], stall["team"]) == (2, 2, "carol", "nlp")
    assert stall["allocated_h"] == pytest.approx(3.0)
    assert stall["idle_h"] == pytest.approx(3.0 - 1.35)
    assert stall["active_pct"] == pytest.approx(45.0)
    assert stall["sm_active_pct"] == pytest.approx(30.0)
    assert jobs.set_index("job_id").loc["idle-1", "active_pct"] == 0.0


def test_gpu_hours_over_time_adds_up_to_the_totals(buckets: pd.DataFrame) -> None:
    series = data.gpu_hours_over_time(buckets)
    sums = series.groupby("measure")["gpu_h"].sum()
    assert sums["allocated"] == pytest.approx(8.0)
    assert sums["active"] == pytest.approx(4.95)
    assert sums["SM-active"] == pytest.approx(3.7)


def test_utilization_by_cluster_weights_by_gpu_hours(buckets: pd.DataFrame) -> None:
    by_cluster = data.utilization_by(buckets, "cluster")
    # 08:00-09:00 in east: train-ok 2 GPU-h at 90 %, idle-1 1 GPU-h at 0, stall-1 0.5 GPU-h at 45.
    east_first = by_cluster[(by_cluster["cluster"] == "east") & (by_cluster["bucket"] == START)]
    assert east_first["active_pct"].item() == pytest.approx(100 * (1.8 + 0.225) / 3.5)
    west = by_cluster[by_cluster["cluster"] == "west"]
    assert west["active_pct"].tolist() == pytest.approx([45.0, 45.0])


def test_heatmap_counts_unallocated_gpus_as_idle(buckets: pd.DataFrame) -> None:
    heat = data.host_heatmap(buckets).set_index(["host", "bucket"])["active_pct"]
    # w1 in the second hour: GPU 0 at 45 %, GPU 1 never allocated.
    assert heat[("w1", START + timedelta(hours=1))] == pytest.approx(22.5)


def test_percentiles_of_bucket_means(buckets: pd.DataFrame) -> None:
    pct = data.utilization_percentiles(buckets).set_index("quantile")["active_pct"]
    # Allocated GPU-hours by level: 0 % (1 h), 45 % (3 h), 90 % (4 h).
    assert pct.tolist() == pytest.approx([45.0, 90.0, 90.0])


def _tiny(tmp_path: Path, interval_s: int, **fleet: object) -> pd.DataFrame:
    spec = Fleet(
        clusters={"c": ("h",)}, gpus_per_host=1, start=START, duration_s=3600,
        interval_s=interval_s, jobs=(Job("j", ("h",), (0,), 0, 3600, 0.5),), **fleet,  # type: ignore[arg-type]
    )  # fmt: skip
    write_segments(spec, tmp_path, rollups=False)
    con = source.connect_segments(tmp_path)
    window = data.window_ending(con, timedelta(hours=6))
    assert window is not None
    return data.gpu_buckets(con, window, default_interval_s=10.0)


def test_interval_is_measured_not_assumed(tmp_path: Path) -> None:
    buckets = _tiny(tmp_path, 15)
    assert set(buckets["interval_s"]) == {15.0}
    assert data.fleet_totals(buckets).allocated_h == pytest.approx(1.0)


def test_gpu_util_stands_in_when_gr_engine_active_is_missing(tmp_path: Path) -> None:
    totals = data.fleet_totals(_tiny(tmp_path, 60, exporter_has_gr_engine=False))
    assert totals.active_h == pytest.approx(0.5)
    assert totals.sm_h is None  # SM_ACTIVE off (dcgm-exporter's default CSV): unknown, not zero


def test_an_agent_outage_does_not_stretch_the_interval(tmp_path: Path) -> None:
    write_segments(
        Fleet(clusters={"c": ("h",)}, gpus_per_host=1, start=START, duration_s=7200, interval_s=10,
              jobs=(Job("j", ("h",), (0,), 0, 7200, 1.0),)),
        tmp_path,
        rollups=False,
    )  # fmt: skip
    con = source.connect_segments(tmp_path)
    # Drop 20 minutes of samples inside the first hour, as if the agent had been down.
    con.execute("CREATE TABLE kept AS SELECT * FROM gpu_samples WHERE NOT "
                "(ts >= TIMESTAMPTZ '2026-11-16 08:10:00+00' AND ts < TIMESTAMPTZ '2026-11-16 08:30:00+00')")  # fmt: skip
    con.execute("DROP VIEW gpu_samples")
    con.execute("ALTER TABLE kept RENAME TO gpu_samples")
    window = data.window_ending(con, timedelta(hours=6))
    assert window is not None
    buckets = data.gpu_buckets(con, window, default_interval_s=30.0)
    assert set(buckets["interval_s"]) == {10.0}
    assert data.fleet_totals(buckets).allocated_h == pytest.approx(2.0 - 20 / 60)


@pytest.mark.parametrize("length", [timedelta(hours=6), timedelta(days=2), WEEK])
def test_rollups_give_the_numbers_of_the_raw_samples(
    warehouse: Warehouse, length: timedelta
) -> None:
    """The warehouse rolls up every published day; reading them must not change a number."""
    con = source.connect_segments(warehouse.data_dir / "segments")
    assert con.sql("SELECT count(*) FROM gpu_samples_1h").fetchall()[0][0] > 0
    window = data.window_ending(con, length)
    assert window is not None
    rolled = data.gpu_buckets(con, window, 10.0)
    for table in ("gpu_samples_1h", "gpu_samples_1m"):
        con.execute(f"CREATE OR REPLACE VIEW {table} AS SELECT * FROM _empty_{table}")
    raw = data.gpu_buckets(con, window, 10.0)
    assert astuple(data.fleet_totals(rolled)) == pytest.approx(astuple(data.fleet_totals(raw)))
    assert set(rolled["interval_s"]) == {60.0}
    by_job = ["job_id", "allocated_h", "active_h", "idle_h", "sm_active_pct"]
    pd.testing.assert_frame_equal(
        data.job_efficiency(rolled)[by_job], data.job_efficiency(raw)[by_job], check_exact=False
    )


def test_an_empty_warehouse_has_no_window(tmp_path: Path) -> None:
    con = source.connect_segments(tmp_path / "nothing")
    assert data.latest_sample(con) is None
    assert data.window_ending(con, WEEK) is None
    window = data.Window(START, START + WEEK, bucket_s=3600)
    assert data.gpu_buckets(con, window, 10.0).empty
    assert data.fleet_totals(data.gpu_buckets(con, window, 10.0)).allocated_h == 0.0
    schema = con.sql("SELECT * FROM step_samples").to_arrow_table().schema
    assert schema.names == [f.name for f in __import__("fleetscope.contract").contract.STEP_SAMPLES]
    assert isinstance(schema, pa.Schema)


def test_job_series_and_steps(warehouse: Warehouse) -> None:
    con = source.connect_segments(warehouse.data_dir / "segments")
    span = data.job_span(con, "stall-1")
    assert span is not None
    assert span.start == START + timedelta(minutes=30)
    gpus = data.job_gpu_series(con, "stall-1", span)
    assert sorted(gpus["gpu"].unique()) == ["e2:1", "w1:0"]
    assert gpus["active_pct"].tolist() == pytest.approx([45.0] * len(gpus))
    assert gpus["gpu_util_pct"].tolist() == pytest.approx([45.0] * len(gpus))
    totals = data.job_step_totals(con, "stall-1")
    assert totals == {"steps": 270.0, "step_time_s": pytest.approx(20.0),
                      "data_wait_pct": pytest.approx(40.0)}  # fmt: skip
    steps = data.job_step_series(con, "stall-1", span)
    assert steps["data_wait_pct"].tolist() == pytest.approx([40.0] * len(steps))
    assert data.job_span(con, "no-such-job") is None


def test_host_health_reports_the_window_increase(warehouse: Warehouse) -> None:
    con = source.connect_segments(warehouse.data_dir / "segments")
    window = data.window_ending(con, WEEK)
    assert window is not None
    health = data.host_health(con, window).set_index("host")
    assert health.loc["w1", "xid_code"] == 79
    assert health.loc["w1", "xid_samples"] == 60  # minutes 60-119 on one GPU
    assert health.loc["w1", "ecc_dbe_new"] == 2
    assert data.unhealthy(health.reset_index()).tolist() == [False, False, True]


def test_opportunities_compare_with_the_previous_window(warehouse: Warehouse) -> None:
    engine = source.catalog_engine(load_settings(env=warehouse.env))
    found = opportunities.tables(engine, START - timedelta(days=6), START + timedelta(days=1))
    assert found.by_rule[["rule_id", "findings", "jobs"]].values.tolist() == [
        ["P1", 1, 1], ["R3", 1, 1]
    ]  # fmt: skip
    r3 = found.by_rule.set_index("rule_id").loc["R3"]
    assert (r3["wasted_gpu_h"], r3["previous_gpu_h"], r3["change_pct"]) == (1.0, 0.5, 100.0)
    # stall-1 (P1) and idle-1 (R3) are both nlp's: 2.2 GPU-h now, old-1's 0.5 before.
    nlp = found.by_team.set_index("team").loc["nlp"]
    assert (nlp["wasted_gpu_h"], nlp["jobs"], nlp["top_rule"]) == (2.2, 2, "P1")
    assert (found.total_gpu_h, found.previous_total_gpu_h) == (2.2, 0.5)
    per_job = opportunities.per_job(engine, START - timedelta(days=6), START + timedelta(days=1))
    assert per_job.values.tolist() == [["stall-1", 1, 1.2], ["idle-1", 1, 1.0]]  # not old-1's
    shown = data.with_findings(pd.DataFrame({"job_id": ["stall-1", "x"]}), per_job)
    assert shown[["findings", "wasted_gpu_h"]].values.tolist() == [[1, 1.2], [0, 0.0]]


def test_opportunities_leave_suppressed_findings_out(tmp_path: Path) -> None:
    """As `fleetscope opportunities` does: a suppressed finding is no opportunity."""
    engine = connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    end = START + timedelta(hours=1)
    with engine.begin() as conn:
        upsert_findings(
            conn,
            [
                CatalogFinding("f-a", "R3", "warn", START, end, 1.0, job_id="a", team="nlp"),
                CatalogFinding("f-b", "R2", "warn", START, end, 0.5, job_id="b", team="cv"),
                # b's idle hour is also R1's: the Jobs page counts b's hours once, as the ranking
                CatalogFinding("f-c", "R1", "warn", START, end, 0.8, job_id="b", team="cv"),
            ],
            run_id="test",
        )
    FindingStore(engine).suppress("team", "nlp", reason="known")
    found = opportunities.tables(engine, START, end)
    assert found.by_rule["rule_id"].tolist() == ["R1", "R2"]
    assert found.by_team["team"].tolist() == ["cv"]
    assert opportunities.per_job(engine, START, end).values.tolist() == [["b", 2, 0.8]]
    assert opportunities.tables(None, START, end).by_rule.empty
    assert opportunities.per_job(None, START, end).empty


def test_search_matches_id_user_team_and_name() -> None:
    jobs = pd.DataFrame(
        {
            "job_id": ["a1", "b2"],
            "user": ["alice", "bob"],
            "team": ["nlp", None],
            "name": ["BERT", "x"],
        }
    )
    assert data.search_jobs(jobs, "bert")["job_id"].tolist() == ["a1"]
    assert data.search_jobs(jobs, "BOB")["job_id"].tolist() == ["b2"]
    assert data.search_jobs(jobs, "  ")["job_id"].tolist() == ["a1", "b2"]
    assert data.search_jobs(jobs, "(")["job_id"].tolist() == []


def test_trace_list_reads_the_catalog_and_the_traces_folder(warehouse: Warehouse) -> None:
    settings = load_settings(env=warehouse.env)
    engine = source.catalog_engine(settings)
    listed = data.trace_list(
        data.catalog_table(engine, "traces"), trace_storage(settings), traces_dir(settings)
    )
    assert listed[["trace_id", "job_id"]].values.tolist() == [["stall-1/mi250", "stall-1"]]
    assert data.catalog_table(None, "traces").empty


def test_catalog_missing_is_empty_not_an_error(tmp_path: Path) -> None:
    settings = load_settings(env={"FLEETSCOPE_CORE_DATA_DIR": str(tmp_path)})
    assert data.jobs_meta(source.catalog_engine(settings)).empty
    assert data.catalog_table(source.catalog_engine(settings), "findings").empty
    assert datetime(2026, 1, 1, tzinfo=UTC)  # keeps the UTC import honest
