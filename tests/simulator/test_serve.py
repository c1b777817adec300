"""Live serving over real HTTP on 127.0.0.1: the page for the clock's second, dcgm-exporter's
Content-Type, 503 for failed scrapes, and a record of every answer."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from simulator.fleet import FleetSpec
from simulator.render import CONTENT_TYPE
from simulator.serve import ExporterFleet
from simulator.sim import FleetSimulator

from .conftest import T0


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


@pytest.mark.slow
def test_each_host_serves_its_page_for_now_and_records_it(
    sim: FleetSimulator, tmp_path: Path
) -> None:
    clock = Clock(T0 + 1234.7)
    before = threading.active_count()
    with ExporterFleet(sim, clock, base_port=0, record_dir=tmp_path) as fleet:
        urls = fleet.urls()
        assert list(urls) == [h.name for h in sim.hosts]
        served = []
        for step in range(3):
            clock.now = T0 + 1234.7 + step
            for host in sim.hosts:
                status, content_type, body = get(urls[host.name])
                expected_ok = not sim.scrape_fails(host, clock.now)
                assert status == (200 if expected_ok else 503)
                if expected_ok:
                    assert content_type == CONTENT_TYPE
                    assert body == sim.page(host, T0 + 1234 + step)
                served.append((host.name, clock.now, status, body if expected_ok else ""))
        assert get(urls[sim.hosts[0].name].replace("/metrics", "/other"))[0] == 404
    assert threading.active_count() == before  # every server thread joined
    recorded = []
    for path in sorted(tmp_path.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            recorded.append((entry["host"], entry["served_at"], entry["status"], entry["page"]))
    assert sorted(recorded) == sorted(served)


def test_a_failing_exporter_answers_503_every_time(tmp_path: Path) -> None:
    flaky = FleetSimulator(
        FleetSpec(hosts=1, seed=1, scrape_failure_rate=1.0), origin_s=T0, horizon_s=3600
    )
    with ExporterFleet(flaky, Clock(T0 + 10), record_dir=tmp_path) as fleet:
        (url,) = fleet.urls().values()
        assert get(url)[0] == 503
    entry = json.loads((tmp_path / f"{flaky.hosts[0].name}.jsonl").read_text())
    assert entry["status"] == 503 and entry["page"] == ""


def test_a_taken_port_is_a_clear_error(sim: FleetSimulator) -> None:
    from fleetscope.errors import ConfigError

    with ExporterFleet(sim, Clock(T0)) as fleet:
        port = int(next(iter(fleet.urls().values())).split(":")[2].split("/")[0])
        with pytest.raises(ConfigError, match="cannot listen"):
            ExporterFleet(sim, Clock(T0), base_port=port)
