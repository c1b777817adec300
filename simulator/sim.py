"""The simulator's one entry point: a fleet over a time range, and everything read from it.

What it is for: `FleetSimulator` ties the parts together so callers (the CLI, the HTTP servers,
tests, benchmarks, evaluation) use one object: `page(host, t)` and `node_page(host, t)` (its node_exporter page) for live serving,
`tables(t0, t1, step_s)` / `iter_tables(...)` for batch generation, `job_records()`,
`truth_records()` and `user_truth_records()` for the catalog and the ground truth. Times are always passed in (Unix
seconds); nothing here reads the clock.

Must never: serve HTTP, write files, or read the clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa

from simulator import batch
from simulator.fleet import Fleet, FleetSpec, Host, Job
from simulator.hardware import GPU_HOST
from simulator.host_load import IDLE_CPU_PCT, HostLoad, boot_s
from simulator.node_page import HostCounters, render_node_page
from simulator.records import job_record, truth_records
from simulator.render import allocations, render_page
from simulator.signals import Frame, SignalModel
from simulator.users import user_truth_records

__all__ = ["FleetSimulator"]


class FleetSimulator:
    """A simulated fleet whose jobs cover [origin_s - 1 day, origin_s + horizon_s)."""

    def __init__(self, spec: FleetSpec, *, origin_s: int, horizon_s: int) -> None:
        self.fleet = Fleet(spec, origin_s, horizon_s)
        self.signals = SignalModel(self.fleet)
        self.host_load = HostLoad(self.signals)
        self._host_units = {
            host.index: [u for u in self.fleet.units if u.host == host.index]
            for host in self.fleet.hosts
        }

    @property
    def hosts(self) -> list[Host]:
        return self.fleet.hosts

    def host_frame(self, host: Host, t: float) -> Frame:
        """Every unit of one host at second floor(t)."""
        units = np.array([u.index for u in self._host_units[host.index]], dtype=np.int64)
        return self.signals.evaluate(units, np.full(len(units), int(t), dtype=np.int64))

    def scrape_fails(self, host: Host, t: float) -> bool:
        """Whether this second's scrape of the host is answered 503 (missing samples)."""
        failed = batch.scrape_failed(
            self.signals, np.array([host.index]), np.array([int(t)], dtype=np.int64)
        )
        return bool(failed[0])

    def page(self, host: Host, t: float) -> str:
        """The host's dcgm-exporter page at second floor(t)."""
        frame = self.host_frame(host, t)
        allocs = allocations(self.fleet, frame, self.signals.seg_pod)
        return render_page(host, self._host_units[host.index], frame, allocs)

    def node_counters(self, host: Host, t: float) -> HostCounters:
        """The host's load sums since boot at second floor(t), for its node_exporter page."""
        second = int(t)
        load = self.host_load
        boot = boot_s(self.fleet, host)
        before_s = self.fleet.origin_s - boot
        cpu_s, io_s = load.sums(host, second)
        ago = [load.sums(host, second - minutes * 60)[0] for minutes in (1, 5, 15)]
        return HostCounters(
            t=second,
            boot_s=boot,
            cpu_pct_s=IDLE_CPU_PCT * before_s + cpu_s,
            iowait_pct_s=load.idle_iowait_pct * before_s + io_s,
            cpu_pct=load.sums(host, second + 1)[0] - cpu_s,
            load_cpu_pct=(
                (cpu_s - ago[0]) / 60.0,
                (cpu_s - ago[1]) / 300.0,
                (cpu_s - ago[2]) / 900.0,
            ),
        )

    def node_page(self, host: Host, t: float) -> str:
        """The host's node_exporter page at second floor(t) (node_page.py)."""
        return render_node_page(GPU_HOST, self.node_counters(host, t))

    def tables(self, t0: int, t1: int, step_s: int) -> dict[str, pa.Table]:
        """gpu_samples, host_samples, step_samples for [t0, t1), every step_s seconds."""
        return batch.tables(self.signals, t0, t1, step_s)

    def iter_tables(
        self, t0: int, t1: int, step_s: int, *, chunk_s: int = 3600
    ) -> Iterator[dict[str, pa.Table]]:
        """`tables` in chunks of chunk_s seconds (aligned to the grid), to bound memory."""
        span = max(step_s, (chunk_s // step_s) * step_s)
        for start in range(t0, t1, span):
            yield self.tables(start, min(start + span, t1), step_s)

    def jobs_between(self, t0: float, t1: float) -> list[Job]:
        return [j for j in self.fleet.jobs if j.start_s < t1 and j.end_s > t0]

    def job_records(self) -> list[dict[str, Any]]:
        """Catalog metadata of every job of the simulated range."""
        return [job_record(self.fleet, job) for job in self.fleet.jobs]

    def truth_records(
        self, t0: float | None = None, t1: float | None = None
    ) -> list[dict[str, Any]]:
        """Ground truth of the jobs overlapping [t0, t1) (all jobs by default)."""
        lo = self.fleet.origin_s - 10**9 if t0 is None else t0
        hi = self.fleet.origin_s + 10**9 if t1 is None else t1
        return truth_records(self.fleet, self.jobs_between(lo, hi))

    def user_truth_records(self, t0: float, t1: float) -> list[dict[str, Any]]:
        """Ground truth per user over [t0, t1): efficiency, GPU-hours and R4 (users.py)."""
        return user_truth_records(self.fleet, t0, t1)
