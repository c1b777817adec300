"""Host source: CPU (user, system, iowait), memory, network, disk, load via psutil; per-job rows
from cgroup v2 (cgroups.py).

`cpu_cores` is the capacity a row's CPU percentages are of, so that 100 % means "saturated"
on every row: the host row's are of the whole host (all cores = 100, from deltas of
psutil.cpu_times() between reads), a job row's are of the cores its cgroup allows (cpuset or
quota, `cgroups.allowed_cores`; the whole host when unlimited), and that allowance is its
`cpu_cores`. The analyzers read it so (R9's CPU saturation, R11/R12's CPU p95, P3's workers per
core). Rates need two reads, so the first read has nulls for them.

Must never: block (psutil calls here read /proc once each; no interval sampling).
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from collector.sources.cgroups import read_job_cgroups
from collector.sources.rates import Rates, cpu_mode_pcts


class PsutilHostSource:
    def __init__(
        self,
        *,
        cluster: str,
        host: str | None = None,
        cgroup_root: Path | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.host = host or socket.gethostname()
        self.cgroup_root = cgroup_root
        self._clock = clock
        self._rates = Rates()
        self._cores = float(psutil.cpu_count() or 1)
        self._last_cpu: tuple[float, Any] | None = None

    def read(self, ts_ms: int) -> list[dict[str, object]]:
        now = self._clock()
        rates = self._rates
        cpu = psutil.cpu_times()
        user = system = iowait = None
        if self._last_cpu is not None:
            pcts = cpu_mode_pcts(_counted(cpu), _counted(self._last_cpu[1]))
            if pcts is not None:
                user, system, iowait = pcts["user"], pcts["system"], pcts.get("iowait", 0.0)
        self._last_cpu = (now, cpu)
        mem = psutil.virtual_memory()
        net = psutil.net_io_counters()
        disk = psutil.disk_io_counters()
        rows: list[dict[str, object]] = [
            {
                "ts": ts_ms,
                "cluster": self.cluster,
                "host": self.host,
                "job_id": None,
                "cpu_user_pct": user,
                "cpu_system_pct": system,
                "cpu_iowait_pct": iowait,
                "cpu_cores": self._cores,
                "mem_used_bytes": float(mem.total - mem.available),
                "mem_total_bytes": float(mem.total),
                "net_rx_bytes_s": rates.rate(
                    "|net_rx", now, float(net.bytes_recv) if net else None
                ),
                "net_tx_bytes_s": rates.rate(
                    "|net_tx", now, float(net.bytes_sent) if net else None
                ),
                "disk_read_bytes_s": rates.rate(
                    "|disk_r", now, float(disk.read_bytes) if disk else None
                ),
                "disk_write_bytes_s": rates.rate(
                    "|disk_w", now, float(disk.write_bytes) if disk else None
                ),
                "load1": os.getloadavg()[0],
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
                host_cores=self._cores,
            )
        return rows


def _counted(cpu_times: Any) -> dict[str, float]:
    """Linux counts guest time inside user time too (psutil's cpu_times_percent drops it)."""
    return {k: v for k, v in cpu_times._asdict().items() if k not in ("guest", "guest_nice")}


def job_rows(
    root: Path,
    rates: Rates,
    now: float,
    *,
    ts_ms: int,
    cluster: str,
    host: str,
    host_cores: float,
) -> list[dict[str, object]]:
    """host_samples rows for each Slurm job cgroup (shared with other host sources)."""
    rows: list[dict[str, object]] = []
    seen = {""}
    for job in read_job_cgroups(root):
        seen.add(job.job_id)
        key = job.job_id + "|"
        user = rates.rate(key + "user", now, job.user_usec)
        system = rates.rate(key + "system", now, job.system_usec)
        cores = job.allowed_cores or host_cores
        scale = 100.0 / (1e6 * cores)  # usec per second -> percent of the job's cores
        rows.append(
            {
                "ts": ts_ms,
                "cluster": cluster,
                "host": host,
                "job_id": job.job_id,
                "cpu_user_pct": user * scale if user is not None else None,
                "cpu_system_pct": system * scale if system is not None else None,
                "cpu_iowait_pct": None,
                "cpu_cores": cores,
                "mem_used_bytes": job.mem_current_bytes,
                "mem_total_bytes": job.mem_max_bytes,
                "net_rx_bytes_s": None,
                "net_tx_bytes_s": None,
                "disk_read_bytes_s": rates.rate(key + "io_r", now, job.io_read_bytes),
                "disk_write_bytes_s": rates.rate(key + "io_w", now, job.io_write_bytes),
                "load1": None,
            }
        )
    rates.forget_except(seen)
    return rows
