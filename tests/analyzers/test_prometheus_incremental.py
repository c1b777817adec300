"""The exporter's job efficiency is incremental: a refresh reads the hours that can still change,
not the whole metrics window, and serves what a read of the whole window serves.

Specification (a real warehouse of segments and roll-ups, 10 h of 3 hosts x 2 GPUs at 10 s, six
jobs starting and ending at odd times, activity with noise; `analyzers.metrics_window_s` = 3 h,
`analyzers.lateness_s` = 120 s, `analyzers.max_gap_s` = 300 s):
- with a clock moving 25 min per refresh across hour boundaries, after every refresh the efficiency
  series equal those of a fresh collector's first refresh at the same time (which reads the whole
  window), jobs entering and leaving the window included;
- the first refresh reads the whole window (from the start of the hour 3 h before now); every
  later one reads at most 2 h plus the lateness (from the start of the hour holding its previous
  refresh's `now - lateness - max_gap`);
- a new leadership term reads the whole window again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest
from sqlalchemy import Engine

from analyzers.prometheus_export import FleetCollector
from simulator.maker.jobs import Fleet, Job, write_segments
from warehouse import catalog
from warehouse.read.reader import open_segments

START = datetime(2026, 11, 16, 8, tzinfo=UTC)
START_S = START.timestamp()
WINDOW_S = 3 * 3600.0
LATENESS_S = 120.0
MAX_GAP_S = 300.0
STEP_S = 25 * 60.0
HOSTS = ("h1", "h2", "h3")
JOBS = (  # (job, hosts, GPUs, start s, end s, GR_ENGINE_ACTIVE)
    Job("a", ("h1",), (0, 1), 0, 36_000, 0.8),
    Job("b", ("h2",), (0,), 1_234, 14_000, 0.3),  # leaves the window part-way through
    Job("c", ("h2",), (0,), 14_300, 36_000, 0.6),  # the same GPU, next job
    Job("d", ("h2",), (1,), 5_000, 23_111, 0.05),
    Job("e", ("h3",), (0, 1), 19_990, 30_007, 0.95),  # enters the window part-way through
    Job("f", ("h3",), (0,), 30_500, 36_000, 0.5),
)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("warehouse")
    fleet = Fleet(
        clusters={"c1": HOSTS}, gpus_per_host=2, start=START, duration_s=36_000, interval_s=10,
        jobs=JOBS, noise=0.1, seed=7,
    )  # fmt: skip
    write_segments(fleet, root)  # with the warehouse's roll-ups, as an embedded server has
    return root


class Reads:
    """A telemetry source over the warehouse that records each range it is asked for."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ranges: list[tuple[float, float]] = []

    def __call__(self, start_s: float, end_s: float) -> duckdb.DuckDBPyConnection:
        self.ranges.append((start_s, end_s))
        return open_segments(self.root)


def collector(engine: Engine, telemetry: Reads, clock: list[float]) -> FleetCollector:
    return FleetCollector(
        engine, telemetry, window_s=WINDOW_S, top_jobs=3, refresh_s=STEP_S,
        lateness_s=LATENESS_S, default_interval_s=10.0, max_gap_s=MAX_GAP_S,
        clock=lambda: clock[0],
    )  # fmt: skip


def efficiency(exporter: FleetCollector) -> dict[str, float]:
    """The efficiency series the collector serves (no team in the catalog: job_id label only)."""
    (family,) = [m for m in exporter.collect() if m.name == "fleetscope_job_gpu_efficiency_ratio"]
    return {s.labels["job_id"]: s.value for s in family.samples if s.labels["team"] == ""}


def test_each_refresh_reads_the_open_hours_and_serves_the_whole_windows_efficiency(
    warehouse: Path, tmp_path: Path
) -> None:
    engine = catalog.connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    clock = [START_S + 4 * 3600 + 17 * 60 + 3.5]
    reads = Reads(warehouse)
    incremental = collector(engine, reads, clock)
    seen: set[str] = set()
    for step in range(14):
        incremental.refresh()
        scratch = collector(engine, Reads(warehouse), clock)
        scratch.refresh()
        assert incremental._failures == scratch._failures == 0
        served = efficiency(incremental)
        assert served == efficiency(scratch), step  # to the 6 decimals /metrics serves
        ratios = incremental._snapshot.efficiency  # the same sums, in another order
        assert ratios == pytest.approx(scratch._snapshot.efficiency, rel=1e-12, abs=0), step
        seen |= set(served)
        start_s, end_s = reads.ranges[-1]
        assert end_s == clock[0]
        if step == 0:  # the whole window
            assert start_s <= clock[0] - WINDOW_S
        else:
            assert end_s - start_s <= 2 * 3600 + LATENESS_S, step
        clock[0] += STEP_S
    assert len(reads.ranges) == 14
    assert reads.ranges[0][0] == START_S + 3600  # from the start of the hour 3 h before
    assert seen == {"a", "b", "c", "d", "e", "other"}  # jobs came and went (top 3, rest other)

    assert set(served) == {"a", "c", "e", "other"}  # at the end: d (ended) and f pooled
    incremental.stand_down()
    incremental.lead()  # a new term: nothing kept from the last one
    assert reads.ranges[-1] == ((clock[0] - WINDOW_S) // 3600 * 3600, clock[0])
