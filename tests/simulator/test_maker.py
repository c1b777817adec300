"""The fleet maker's one way out: both descriptions give contract tables that load and publish."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from fleetscope.contract import TABLES
from simulator.maker.jobs import Fleet as JobFleet
from simulator.maker.jobs import Job, write_segments
from simulator.maker.series import Fleet as SeriesFleet
from simulator.maker.tables import Maker, connect, publish
from warehouse.read.reader import open_segments

START = datetime(2026, 11, 16, 23, tzinfo=UTC)  # the range crosses a UTC midnight


def _jobs() -> JobFleet:
    job = Job("job-1", ("h1",), (0, 1), 0, 1800, active=0.5, step_time_s=30.0)
    return JobFleet({"c1": ("h1", "h2")}, 2, START, 7200, 10, jobs=(job,))


def _series() -> SeriesFleet:
    return (
        SeriesFleet()
        .gpus("job-1", "h1", [0, 1], 0, 30)
        .host("h1", 0, 30)
        .steps("job-1", "h1", 0, 0, 5)
    )


def test_both_descriptions_are_makers_of_contract_tables() -> None:
    makers: list[Maker] = [_jobs(), _series()]
    for maker in makers:
        made = maker.tables()
        assert set(made) == {"gpu_samples", "host_samples", "step_samples"}
        for name, table in made.items():
            assert table.schema == TABLES[name], name


def test_a_job_fleets_tables_hold_what_write_segments_writes(tmp_path: Path) -> None:
    fleet = _jobs()
    rows = write_segments(fleet, tmp_path / "segments", rollups=False)
    conn = connect(fleet)
    try:
        assert conn.sql("SELECT count(*) FROM gpu_samples").fetchall()[0][0] == rows == 720 * 4
        allocated = "SELECT count(*) FROM gpu_samples WHERE job_id = 'job-1'"
        assert conn.sql(allocated).fetchall()[0][0] == 180 * 2
        assert conn.sql("SELECT count(*) FROM step_samples").fetchall()[0][0] == 60
    finally:
        conn.close()


def test_publish_writes_live_segments_a_reader_sees(tmp_path: Path) -> None:
    publish(_series(), tmp_path)
    reader = open_segments(tmp_path)
    try:
        assert reader.sql("SELECT count(*) FROM gpu_samples").fetchall()[0][0] == 2 * 180
        assert reader.sql("SELECT count(*) FROM step_samples").fetchall()[0][0] == 5
    finally:
        reader.close()


NOISY = """
import json
from datetime import UTC, datetime
from simulator.maker.jobs import Fleet, Job
job = Job("job-1", ("h1", "h2"), (0, 1), 0, 3600, active=0.5)
fleet = Fleet({"c1": ("h1", "h2")}, 2, datetime(2026, 11, 16, tzinfo=UTC), 3600, 10, jobs=(job,),
              noise=0.05, seed=7)
print(json.dumps(fleet.tables()["gpu_samples"].column("gpu_util").to_pylist()))
"""


def test_a_noisy_fleet_is_the_same_fleet_in_every_process() -> None:
    """The noise is drawn from the fleet's seed and each host's name; Python salts str hashes per
    process (PYTHONHASHSEED), so a seed made from `hash(host)` drew other numbers every run."""

    def utilization(hash_seed: str) -> str:
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        done = subprocess.run(
            [sys.executable, "-c", NOISY], env=env, capture_output=True, text=True, check=True
        )
        return done.stdout

    first = utilization("1")
    assert len(set(json.loads(first))) > 1  # the noise is there
    assert utilization("2") == first
