"""node_exporter as the host source: scraped and parsed exactly like dcgm-exporter.

Metrics read (node_exporter's documented names): node_cpu_seconds_total{cpu,mode} (user, system,
iowait; percentages of all cores from deltas), node_memory_MemTotal_bytes and
node_memory_MemAvailable_bytes (used = total - available, as `free` computes it),
node_network_receive/transmit_bytes_total{device} (all devices but `lo`),
node_disk_read/written_bytes_total{device}, node_load1. Per-job rows still come from cgroup v2
when a cgroup root is set, because node_exporter has no per-job view.

Must never: count the loopback device as network traffic.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from pathlib import Path

from collector.http import Transport, UrllibTransport
from collector.sources.dcgm import fetch_text
from collector.sources.host import job_rows
from collector.sources.rates import Rates, cpu_mode_pcts
from fleetscope.exposition import ExpositionParser


class NodeExporterSource:
    def __init__(
        self,
        url: str,
        *,
        cluster: str,
        host: str | None = None,
        transport: Transport | None = None,
        timeout_s: float = 5.0,
        cgroup_root: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = url
        self.cluster = cluster
        self.host = host or socket.gethostname()
        self.transport = transport or UrllibTransport()
        self.timeout_s = timeout_s
        self.cgroup_root = cgroup_root
        self._clock = clock
        self._parser = ExpositionParser()
        self._rates = Rates()
        self._last_cpu: dict[str, float] | None = None

    def read(self, ts_ms: int) -> list[dict[str, object]]:
        now = self._clock()
        page = self._parser.parse(fetch_text(self.transport, self.url, self.timeout_s))
        cpu_by_mode: dict[str, float] = {}
        cores: set[str] = set()
        sums: dict[str, float] = {}
        gauges: dict[str, float] = {}
        for s in page.samples:
            name, labels, value = s.name, s.labels, float(s.value)
            if name == "node_cpu_seconds_total":
                mode = labels.get("mode", "")
                cpu_by_mode[mode] = cpu_by_mode.get(mode, 0.0) + value
                cores.add(labels.get("cpu", ""))
            elif name in (
                "node_network_receive_bytes_total",
                "node_network_transmit_bytes_total",
            ):
                if labels.get("device") != "lo":
                    sums[name] = sums.get(name, 0.0) + value
            elif name in ("node_disk_read_bytes_total", "node_disk_written_bytes_total"):
                sums[name] = sums.get(name, 0.0) + value
            elif name in (
                "node_memory_MemTotal_bytes",
                "node_memory_MemAvailable_bytes",
                "node_load1",
            ):
                gauges[name] = value
        user = system = iowait = None
        if self._last_cpu is not None and cpu_by_mode:
            pcts = cpu_mode_pcts(cpu_by_mode, self._last_cpu)
            if pcts is not None:
                user = pcts.get("user", 0.0)
                system = pcts.get("system", 0.0)
                iowait = pcts.get("iowait", 0.0)
        self._last_cpu = cpu_by_mode or None
        mem_total = gauges.get("node_memory_MemTotal_bytes")
        mem_avail = gauges.get("node_memory_MemAvailable_bytes")
        rates = self._rates
        n_cores = float(len(cores)) if cores else None
        rows: list[dict[str, object]] = [
            {
                "ts": ts_ms,
                "cluster": self.cluster,
                "host": self.host,
                "job_id": None,
                "cpu_user_pct": user,
                "cpu_system_pct": system,
                "cpu_iowait_pct": iowait,
                "cpu_cores": n_cores,
                "mem_used_bytes": mem_total - mem_avail
                if mem_total is not None and mem_avail is not None
                else None,
                "mem_total_bytes": mem_total,
                "net_rx_bytes_s": rates.rate(
                    "|rx", now, sums.get("node_network_receive_bytes_total")
                ),
                "net_tx_bytes_s": rates.rate(
                    "|tx", now, sums.get("node_network_transmit_bytes_total")
                ),
                "disk_read_bytes_s": rates.rate("|dr", now, sums.get("node_disk_read_bytes_total")),
                "disk_write_bytes_s": rates.rate(
                    "|dw", now, sums.get("node_disk_written_bytes_total")
                ),
                "load1": gauges.get("node_load1"),
            }
        ]
        if self.cgroup_root is not None:
            rows += job_rows(
                self.cgroup_root,
                rates,
                now,
                ts_ms=ts_ms,
                cluster=self.cluster,
                host=self.host,
                host_cores=n_cores or 1.0,
            )
        return rows
