"""The simulated host's node_exporter page: node_exporter 1.x's format line for line (against its
own fixture, tests/data/node_exporter/), and what the collector's NodeExporterSource makes of it
over real HTTP: the simulated host's 96 cores and 2 TiB, its CPU percent the simulated load
between two scrapes, the same numbers batch.py's whole-host rows have."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from collector.sources.node_exporter import NodeExporterSource
from simulator.fleet import FleetSpec, Host
from simulator.hardware import GPU_HOST
from simulator.node_page import go_float
from simulator.render import CONTENT_TYPE
from simulator.serve import ExporterFleet
from simulator.sim import FleetSimulator

from .conftest import T0
from .test_serve import Clock, get

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "node_exporter" / "e2e_output_excerpt.prom"
SAMPLE_LINE = re.compile(r"^(\w+)(\{[^}]*\})? (\S+)$")


def families(page: str) -> dict[str, list[str]]:
    """Family name -> its lines (HELP, TYPE, samples), in page order."""
    out: dict[str, list[str]] = {}
    for line in page.splitlines():
        name = line.split(" ")[2] if line.startswith("#") else SAMPLE_LINE.match(line)[1]  # type: ignore[index]
        out.setdefault(name, []).append(line)
    return out


def label_names(line: str) -> list[str]:
    return re.findall(r'(\w+)="', line)


def busiest(sim: FleetSimulator, span_s: int) -> tuple[Host, int]:
    """The host and start second of the busiest span_s seconds among the first hours' starts."""
    starts = [T0 + 900 * k for k in range(48)]
    means = {
        (host.index, t): float(sim.host_load.percent(host, t, t + span_s)[0].mean())
        for host in sim.hosts
        for t in starts
    }
    (index, t), _ = max(means.items(), key=lambda item: item[1])
    return sim.hosts[index], t


def test_the_page_has_node_exporters_help_type_lines_label_order_and_number_format(
    sim: FleetSimulator,
) -> None:
    sample = families(SAMPLE.read_text())
    page = sim.node_page(sim.hosts[0], T0 + 5000)
    served = families(page)
    assert page.endswith("\n") and not page.endswith("\n\n") and "\n\n" not in page
    assert list(served) == sorted(served)  # client_golang sorts families by name, as the sample
    assert list(sample) == sorted(sample)
    for name, lines in sample.items():
        assert served[name][:2] == lines[:2], name  # HELP and TYPE, byte for byte
        samples = [line for line in lines[2:]]
        if samples:
            assert {tuple(label_names(line)) for line in served[name][2:]} == {
                tuple(label_names(samples[0]))
            }, name
    assert served["node_memory_MemAvailable_bytes"][:2] == [
        line.replace("MemTotal", "MemAvailable")
        for line in sample["node_memory_MemTotal_bytes"][:2]
    ]
    # per CPU the sample's modes in the sample's order; CPUs sorted as strings, as client_golang does
    modes = [
        re.findall(r'mode="(\w+)"', line)[0] for line in sample["node_cpu_seconds_total"][2:10]
    ]
    cpu_lines = served["node_cpu_seconds_total"][2:]
    assert [re.findall(r'mode="(\w+)"', line)[0] for line in cpu_lines[:8]] == modes
    cpus = list(dict.fromkeys(re.findall(r'cpu="(\d+)"', line)[0] for line in cpu_lines))
    assert cpus == sorted(str(i) for i in range(GPU_HOST.logical_cpus))
    assert cpus[:4] == ["0", "1", "10", "11"]
    assert len(cpu_lines) == GPU_HOST.logical_cpus * len(modes)
    # every value of the sample is printed as node_exporter printed it
    for lines in sample.values():
        for line in lines[2:]:
            value = SAMPLE_LINE.match(line)[3]  # type: ignore[index]
            assert go_float(float(value)) == value


def test_the_same_fleet_gives_the_same_page_whatever_was_asked_before() -> None:
    spec = FleetSpec(hosts=2, seed=5)
    walked = FleetSimulator(spec, origin_s=T0, horizon_s=86_400)
    direct = FleetSimulator(spec, origin_s=T0, horizon_s=86_400)
    host = walked.hosts[1]
    for t in range(T0 - 30, T0 + 7200, 397):
        walked.node_page(host, t)
    assert walked.node_page(host, T0 + 7300.9) == direct.node_page(direct.hosts[1], T0 + 7300)


@pytest.mark.slow
def test_node_exporter_source_reads_the_simulated_host_and_its_load_between_scrapes(
    sim: FleetSimulator,
) -> None:
    span_s = 60
    host, t1 = busiest(sim, span_s)
    cpu, io = sim.host_load.percent(host, t1, t1 + span_s)
    assert cpu.mean() > 30.0  # a busy host, so that the test tells load from idle
    clock = Clock(t1 + 0.5)
    with ExporterFleet(sim, clock, base_port=0) as fleet:
        url = fleet.node_urls()[host.name]
        status, content_type, _ = get(url)
        assert (status, content_type) == (200, CONTENT_TYPE)
        source = NodeExporterSource(url, cluster="sim", host=host.name, clock=clock)
        first = source.read(int(t1 * 1000))
        clock.now = t1 + span_s + 0.5
        (row,) = source.read(int((t1 + span_s) * 1000))
    assert first[0]["cpu_user_pct"] is None  # one scrape has no delta yet
    assert row["host"] == host.name
    assert row["cpu_cores"] == float(GPU_HOST.logical_cpus) == 96.0
    assert row["mem_total_bytes"] == float(GPU_HOST.mem_total_bytes) == 2 * 1024**4
    # CPU percent of the interval: the simulated load's mean (to the page's 1/100 s ticks)
    assert row["cpu_user_pct"] == pytest.approx(0.9 * cpu.mean(), abs=0.01)
    assert row["cpu_system_pct"] == pytest.approx(0.1 * cpu.mean(), abs=0.01)
    assert row["cpu_iowait_pct"] == pytest.approx(io.mean(), abs=0.01)
    assert row["net_rx_bytes_s"] == pytest.approx(2.5e6 * cpu.mean(), rel=1e-6)
    assert row["disk_read_bytes_s"] == pytest.approx(4.0e6 * cpu.mean(), rel=1e-6)
    # ... and batch.py's whole-host rows of the same seconds say the same
    hosts = sim.tables(t1, t1 + span_s, 1)["host_samples"].to_pylist()
    whole = [r for r in hosts if r["host"] == host.name and r["job_id"] is None]
    assert len(whole) == span_s
    assert row["cpu_user_pct"] == pytest.approx(
        float(np.mean([r["cpu_user_pct"] for r in whole])), abs=0.01
    )
    assert row["cpu_cores"] == whole[0]["cpu_cores"]
    assert row["mem_total_bytes"] == whole[0]["mem_total_bytes"]
