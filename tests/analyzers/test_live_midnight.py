"""Live rules across midnight UTC (issue 31): analysis buckets are UTC days, and a rule whose
condition spans a bucket's start sees the evidence before it. An allocated GPU idle since 50 min
before midnight gets R3 at the first live tick after its 60 min, not 60 min after midnight; one
idle since 2 min before midnight gets R1 once it has run 300 s, not 300 s after midnight; each
idle hour is counted in exactly one day's finding. Real SQLite catalog, real DuckDB, the
writer's real commit hook, the embedded scheduler's live ticks (`run_due(live=True)`)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from analyzers.run.results import FindingStore
from analyzers.run.runner import Pipeline
from analyzers.run.schedule import run_due
from simulator.maker.series import T0, Fleet
from warehouse import catalog
from warehouse.storage.arrival_hook import ArrivalMarks

from .test_arrival_schedule import DAY, IDLE, KW, Clock, land

MIDNIGHT = T0 + DAY
INTERVAL_S = 10.0


@pytest.fixture
def store(tmp_path: Path) -> FindingStore:
    return FindingStore(catalog.connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}"))


class LiveServer:
    """An agent delivering one GPU's idle samples each minute and the embedded scheduler ticking
    each minute after them, as a server on the default schedule does."""

    def __init__(self, store: FindingStore, tmp_path: Path, idle_from: datetime) -> None:
        self.store = store
        self.path = tmp_path / "telemetry.duckdb"
        self.wall = Clock(idle_from)
        self.marks = ArrivalMarks(store.engine, 86400, clock=self.wall)
        self.delivered = idle_from  # samples before this instant have been committed
        self.seq = 0

    def connect(self) -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(self.path), read_only=True)

    def tick_at(self, tick: datetime) -> None:
        """Deliver every sample before `tick` (committed 5 s before it), then run the tick."""
        start_min = (self.delivered - T0).total_seconds() / 60
        minutes = (tick - self.delivered).total_seconds() / 60
        self.wall.at = tick - timedelta(seconds=5)
        land(
            Fleet().gpus("idle", "h1", [0], start_min, minutes, **IDLE),
            self.path,
            self.marks,
            self.seq,
        )
        self.seq += 1
        self.delivered = tick
        self.wall.at = tick
        results = run_due(Pipeline.default(), self.store, self.connect, tick, live=True, **KW)
        assert not [r.errors for r in results if r.errors]

    def hours(self, rule: str) -> dict[str, float]:
        """Each day's GPU-hours of `rule`'s finding."""
        return {
            f"{s.finding.bucket_start:%Y-%m-%d}": s.finding.wasted_gpu_hours
            for s in self.store.findings()
            if s.finding.rule_id == rule
        }

    def r3(self) -> dict[str, float]:
        return self.hours("R3")


def minutes(n: float) -> timedelta:
    return timedelta(minutes=n)


def test_r3_holds_at_the_first_tick_after_60_min_of_idle_that_began_before_midnight(
    store: FindingStore, tmp_path: Path
) -> None:
    idle_from = MIDNIGHT - minutes(50)
    server = LiveServer(store, tmp_path, idle_from)
    for at in (minutes(-40), minutes(-10), minutes(-1), minutes(1), minutes(5), minutes(9)):
        server.tick_at(MIDNIGHT + at)
    assert server.r3() == {}  # 59 minutes of idle: not yet
    # the tick after the 60 min have passed (the last sample, at 00:10:50, closes the 60th)
    server.tick_at(MIDNIGHT + minutes(11))
    assert list(server.r3()) == [f"{MIDNIGHT:%Y-%m-%d}"]
    (finding,) = [s.finding for s in store.findings() if s.finding.rule_id == "R3"]
    assert finding.evidence["longest_idle_min"] == pytest.approx(61.0)
    # the 50 min before midnight were never reported by the day before: counted here, once
    assert finding.wasted_gpu_hours == pytest.approx(61 / 60)
    assert finding.evidence["idle_before_window_h"] == pytest.approx(50 / 60, abs=1e-4)


def test_an_idle_stretch_reported_before_midnight_is_counted_once_across_the_two_days(
    store: FindingStore, tmp_path: Path
) -> None:
    idle_from = MIDNIGHT - minutes(90)
    server = LiveServer(store, tmp_path, idle_from)
    for at in (minutes(-70), minutes(-29), minutes(-1), minutes(2), minutes(30), minutes(31)):
        server.tick_at(MIDNIGHT + at)
    hours = server.r3()
    # the day before reported it at 60 min and kept its 90 minutes; today counts its own 31
    assert hours == {
        f"{T0:%Y-%m-%d}": pytest.approx(90 / 60),
        f"{MIDNIGHT:%Y-%m-%d}": pytest.approx(31 / 60),
    }
    assert sum(hours.values()) == pytest.approx(121 / 60)  # 22:30 to 00:31, once
    today = [
        s.finding
        for s in store.findings()
        if s.finding.rule_id == "R3" and s.finding.bucket_start == MIDNIGHT
    ]
    # judged by its real length (121 min, past the 120 min cancel threshold), not 31 min
    assert [f.evidence["longest_idle_min"] for f in today] == [pytest.approx(121.0)]
    assert [f.severity.value for f in today] == ["critical"]
    assert "idle_before_window_h" not in today[0].evidence


def test_r1_holds_300_s_after_a_gpu_that_began_just_before_midnight_went_idle(
    store: FindingStore, tmp_path: Path
) -> None:
    server = LiveServer(store, tmp_path, MIDNIGHT - minutes(2))
    for at in (minutes(-1), minutes(1), minutes(3)):
        server.tick_at(MIDNIGHT + at)
    assert server.hours("R1") == {}  # 300 s exactly by 00:03:00: jobstats wants more
    server.tick_at(MIDNIGHT + minutes(4))
    # its 2 minutes before midnight were under 300 s for the day before: counted today, once
    assert server.hours("R1") == {f"{MIDNIGHT:%Y-%m-%d}": pytest.approx(6 / 60)}
