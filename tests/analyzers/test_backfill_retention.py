"""`fleetscope backfill` over days retention retired keeps their findings (embedded mode).

A real warehouse (published segments, catalog) with findings for 2025-03-03 and 2025-03-04; the
server's own maintenance pass (roll-ups, then retention with one day of raw samples kept) retires
2025-03-03's raw samples. A backfill over both days then re-runs 2025-03-04 as before and skips
2025-03-03, naming it and why, its findings untouched; `--rerun-retired` re-runs it on what is
left, which is nothing, so its findings go.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

from analyzers.run.backfill import RetiredBucket, plan
from analyzers.run.results import FindingStore
from analyzers.run.schedule import backfill_windows
from app.cli import main
from simulator.maker.series import Fleet
from simulator.maker.tables import publish
from warehouse import catalog
from warehouse.storage.maintenance import Maintenance, MaintenanceConfig
from warehouse.storage.retired_days import RetiredDay
from warehouse.storage.segments import SegmentStore

IDLE: dict[str, Any] = {
    "gpu_util": 0.0,
    "gr_engine_active": 0.0,
    "sm_active": 0.0,
    "tensor_active": 0.0,
}
DAY_MIN = 24 * 60
RETIRED = "2025-03-03T00:00:00+00:00 .. 2025-03-04T00:00:00+00:00"
KEPT = "2025-03-04T00:00:00+00:00 .. 2025-03-05T00:00:00+00:00"
BOTH_DAYS = ["backfill", "--start", "2025-03-03", "--end", "2025-03-05"]
# Each backfill keeps the quantile sketches of two whole days, an hour slice at a time: 150-300 s
# on a 2-core machine at load 30-40 (the suite-wide 300 s cut one mid-query).
pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """Two idle jobs, one per day (R1 and R3 each: 2 GPUs, 3 hours), host samples on both days."""
    fleet = Fleet().gpus("idle-mon", "h1", range(2), 0, 180, **IDLE).host("h1", 0, 180)
    fleet.gpus("idle-tue", "h1", range(2), DAY_MIN, 180, **IDLE).host("h1", DAY_MIN, 180)
    publish(fleet, tmp_path / "var" / "segments")
    return tmp_path


def config(tmp_path: Path) -> list[str]:
    path = tmp_path / "fleetscope.toml"
    path.write_text(f'[core]\ndata_dir = "{tmp_path / "var"}"\n')
    return ["--config", str(path)]


def retain_one_day(tmp_path: Path) -> dict[str, int]:
    """The server's maintenance pass on 2025-03-05 with warehouse.raw_retention_days = 1."""
    store = SegmentStore(tmp_path / "var" / "segments")
    now = datetime(2025, 3, 5, 6, tzinfo=UTC).timestamp()
    config = MaintenanceConfig(interval_s=60, target_bytes=10**9, grace_s=0, retention_days=1)
    return Maintenance(store, None, config, clock=lambda: now).run_once()


def findings_by_job(tmp_path: Path) -> dict[str, list[tuple[str, str, float]]]:
    store = FindingStore(catalog.connect(f"sqlite:///{tmp_path / 'var' / 'catalog.sqlite'}"))
    out: dict[str, list[tuple[str, str, float]]] = {}
    for s in store.findings():
        f = s.finding
        out.setdefault(str(f.job_id), []).append((f.finding_id, f.rule_id, f.wasted_gpu_hours))
    return {job: sorted(found, key=lambda x: x[1]) for job, found in out.items()}


def test_backfill_skips_a_day_retention_retired_and_keeps_its_findings(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = config(warehouse)
    assert main([*argv, *BOTH_DAYS]) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        f"{RETIRED}  p0: 2 finding(s)",
        f"{KEPT}  p0: 2 finding(s)",
    ]
    before = findings_by_job(warehouse)
    assert sorted(before) == ["idle-mon", "idle-tue"]
    assert [(rule, hours) for _id, rule, hours in before["idle-mon"]] == [("R1", 6.0), ("R3", 6.0)]

    done = retain_one_day(warehouse)
    assert (done["rolled_up_days"], done["expired"]) == (2, 2)  # Monday's gpu and host segments
    # Tuesday, within retention, gains a job since: its re-run reads it, as before
    late = Fleet().gpus("idle-tue-2", "h2", range(1), DAY_MIN, 120, **IDLE).host("h2", DAY_MIN, 120)
    store = SegmentStore(warehouse / "var" / "segments")
    store.publish(2, {name: store.write(name, rows, 2) for name, rows in late.tables().items()})

    assert main([*argv, *BOTH_DAYS]) == 0
    after = findings_by_job(warehouse)
    assert [(rule, hours) for _id, rule, hours in after.pop("idle-tue-2")] == [
        ("R1", 2.0),
        ("R3", 2.0),
    ]
    assert after == before  # Monday's findings untouched, Tuesday's the same ids
    assert capsys.readouterr().out == (
        f"{RETIRED}  skipped, findings kept: raw samples retired (2025-03-03: retention retired "
        "its 2160 raw GPU samples; roll-ups keep them by minute and hour)\n"
        f"{KEPT}  p0: 4 finding(s)\n"
        "backfill: 1 bucket(s) re-run, 1 skipped: retention retired their raw samples, their "
        "findings are kept (--rerun-retired re-runs them on what is left)\n"
    )


def test_rerun_retired_re_runs_the_retired_day_on_what_is_left(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = config(warehouse)
    assert main([*argv, *BOTH_DAYS]) == 0
    before = findings_by_job(warehouse)
    retain_one_day(warehouse)
    capsys.readouterr()

    assert main([*argv, *BOTH_DAYS, "--rerun-retired"]) == 0
    assert capsys.readouterr().out == (
        f"{RETIRED}  re-run anyway (--rerun-retired): raw samples retired (2025-03-03: "
        "retention retired its 2160 raw GPU samples; roll-ups keep them by minute and hour)\n"
        f"{RETIRED}  p0: 0 finding(s)\n"
        f"{KEPT}  p0: 2 finding(s)\n"
        "backfill: 2 bucket(s) re-run, 1 of them on what is left after retention "
        "(--rerun-retired)\n"
    )
    assert findings_by_job(warehouse) == {"idle-tue": before["idle-tue"]}


def test_a_day_before_the_newest_retired_day_is_skipped_though_it_had_no_gpu_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Sunday held host samples only: no GPU roll-up marks it, but retention's cut-off passed
    it when it retired Monday, and its host samples went with Monday's."""
    fleet = Fleet().host("h1", -DAY_MIN, 60).gpus("idle-mon", "h1", range(2), 0, 180, **IDLE)
    publish(fleet, tmp_path / "var" / "segments")
    retain_one_day(tmp_path)
    assert (
        main([*config(tmp_path), "backfill", "--start", "2025-03-02", "--end", "2025-03-03"]) == 0
    )
    assert capsys.readouterr().out == (
        "2025-03-02T00:00:00+00:00 .. 2025-03-03T00:00:00+00:00  skipped, findings kept: raw "
        "samples retired (2025-03-02: before 2025-03-03, the newest day retention retired: its "
        "cut-off took the host and step samples with it)\n"
        "backfill: 0 bucket(s) re-run, 1 skipped: retention retired their raw samples, their "
        "findings are kept (--rerun-retired re-runs them on what is left)\n"
    )


def test_days_in_a_row_retired_for_one_reason_share_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A month before retention's cut-off is one line, not thirty; the marked Monday, retired
    for its own reason, keeps its line, and the summary still counts every bucket."""
    fleet = Fleet().host("h1", -DAY_MIN, 60).gpus("idle-mon", "h1", range(2), 0, 180, **IDLE)
    publish(fleet, tmp_path / "var" / "segments")
    retain_one_day(tmp_path)
    argv = [*config(tmp_path), "backfill", "--start", "2025-02-01", "--end", "2025-03-04"]
    assert main(argv) == 0
    assert capsys.readouterr().out == (
        "2025-02-01T00:00:00+00:00 .. 2025-03-03T00:00:00+00:00  30 buckets skipped, findings "
        "kept: raw samples retired (2025-02-01 to 2025-03-02: before 2025-03-03, the newest day "
        "retention retired: its cut-off took the host and step samples with it)\n"
        f"{RETIRED}  skipped, findings kept: raw samples retired (2025-03-03: retention retired "
        "its 2160 raw GPU samples; roll-ups keep them by minute and hour)\n"
        "backfill: 0 bucket(s) re-run, 31 skipped: retention retired their raw samples, their "
        "findings are kept (--rerun-retired re-runs them on what is left)\n"
    )


def test_a_bucket_partly_retired_is_skipped_once_for_all_its_partitions() -> None:
    """Two-day buckets (aligned to the epoch: March 3-5, 5-7) in three partitions: the one holding
    the retired Monday and the kept Tuesday is skipped whole, listed once."""
    monday = RetiredDay(date(2025, 3, 3), "retention retired its raw GPU samples")
    windows = backfill_windows(
        datetime(2025, 3, 3, tzinfo=UTC), datetime(2025, 3, 7, tzinfo=UTC), 2 * 86400, 3
    )
    planned = plan(windows, {monday.day: monday}, rerun_retired=False)
    assert [(w.start.day, w.partition) for w in planned.windows] == [(5, 0), (5, 1), (5, 2)]
    assert planned.retired == [
        RetiredBucket(datetime(2025, 3, 3, tzinfo=UTC), datetime(2025, 3, 5, tzinfo=UTC), (monday,))
    ]
    assert plan(windows, {monday.day: monday}, rerun_retired=True).windows == windows


BACKFILL_BROKER = "redis://127.0.0.1:6379/12"  # a database of its own (tests/ use 10, 13-15)


def test_backfill_with_celery_sends_its_windows_to_the_broker_of_its_config(
    warehouse: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--celery` enqueues on the broker `--config` names, not on the environment's."""
    import json

    import redis

    path = warehouse / "fleetscope.toml"
    path.write_text(
        f'[core]\ndata_dir = "{warehouse / "var"}"\n[celery]\nbroker_url = "{BACKFILL_BROKER}"\n'
    )
    broker = redis.Redis.from_url(BACKFILL_BROKER)
    broker.flushdb()
    try:
        assert main(["--config", str(path), *BOTH_DAYS, "--celery"]) == 0
        sent = [json.loads(m) for m in broker.lrange("celery", 0, -1)]
    finally:
        broker.flushdb()
    # embedded mode's Celery windows: analyzers.partitions (4) hash slices of each day
    assert sorted((m["headers"]["task"], m["headers"]["argsrepr"]) for m in sent) == [
        ("fleetscope.analyze_window", f"['{day}T00:00:00+00:00', '{end}T00:00:00+00:00', {p}, 4]")
        for day, end in (("2025-03-03", "2025-03-04"), ("2025-03-04", "2025-03-05"))
        for p in range(4)
    ]
    assert capsys.readouterr().out.splitlines()[-1] == (
        "backfill: 2 bucket(s) enqueued (8 window task(s))"
    )
