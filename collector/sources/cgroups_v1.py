"""Per-job CPU, memory and disk I/O from cgroup v1, as Slurm's cgroup/v1 plugin lays jobs out.

Under cgroup v1 every controller is its own hierarchy, and Slurm (proctrack/cgroup, task/cgroup,
slurm.conf `CgroupPlugin=cgroup/v1`, Slurm's cgroup.conf documentation) puts a job at
`<root>/<controller>/slurm/uid_<uid>/job_<id>/` (`slurm_<nodename>/` when several slurmd run on
one host). Files read, as the kernel's cgroup-v1 documentation defines them:

- `cpuacct.usage` (nanoseconds) and `cpuacct.stat` (`user`/`system` in USER_HZ ticks), in the
  `cpuacct` hierarchy (usually co-mounted with `cpu` as `cpu,cpuacct`, linked as both names);
- `cpu.cfs_quota_us` / `cpu.cfs_period_us` (a quota in cores; -1: none) in the `cpu` hierarchy;
- `memory.usage_in_bytes`, `memory.limit_in_bytes` (the kernel's "no limit" is PAGE_COUNTER_MAX
  pages, about 2^63 bytes: no limit here) in `memory`;
- `cpuset.cpus` (a CPU list) in `cpuset`; `blkio.throttle.io_service_bytes` (Read/Write per
  device) in `blkio`.

Recorded trees from real Slurm nodes: tests/data/cgroup/. Must never write to the tree or fail
when a job ends between listing and reading.
"""

from __future__ import annotations

import os
from pathlib import Path

from collector.sources.cgroup_files import (
    CgroupReading,
    _cpu_list_size,
    _keyed,
    _number,
    _read,
)

NO_LIMIT_BYTES = 2**62  # limits at or above this are the kernel's "unlimited"


def _subdirs(path: Path, prefix: str) -> list[Path]:
    """`path`'s folders whose names start with `prefix`, sorted; none if it cannot be listed.
    (os.scandir, not Path.glob: this runs for five hierarchies on every host read, and glob's
    per-call set-up was most of the cost on a node without Slurm jobs.)"""
    try:
        names = sorted(e.name for e in os.scandir(path) if e.name.startswith(prefix) and e.is_dir())
    except OSError:
        return []
    return [path / name for name in names]


def _job_dirs(hierarchy: Path) -> dict[str, Path]:
    """job id -> its folder, for every `slurm*/uid_*/job_*` under one controller hierarchy."""
    jobs: dict[str, Path] = {}
    for slurm in _subdirs(hierarchy, "slurm"):
        for uid in _subdirs(slurm, "uid_"):
            jobs.update({job.name[4:]: job for job in _subdirs(uid, "job_")})
    return jobs


def _hierarchy(root: Path, *names: str) -> Path:
    """The first controller hierarchy that exists (`cpuacct`, `cpu,cpuacct`...)."""
    for name in names:
        if (root / name).is_dir():
            return root / name
    return root / names[0]


def _blkio(text: str | None) -> tuple[float | None, float | None]:
    if text is None:
        return None, None
    totals = {"Read": 0.0, "Write": 0.0}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in totals and parts[2].isdigit():
            totals[parts[1]] += float(parts[2])
    return totals["Read"], totals["Write"]


def _limit(text: str | None) -> float | None:
    value = _number(text)
    return None if value is None or value >= NO_LIMIT_BYTES else value


def _cfs_cores(job_cpu: Path) -> float | None:
    quota, period = (
        _number(_read(job_cpu / "cpu.cfs_quota_us")),
        _number(_read(job_cpu / "cpu.cfs_period_us")),
    )
    return quota / period if quota is not None and quota > 0 and period else None


def read_v1_job_cgroups(root: Path, *, ticks_per_s: float | None = None) -> list[CgroupReading]:
    """One reading per Slurm job found in the v1 `cpuacct` or `memory` hierarchies under `root`."""
    ticks = ticks_per_s or float(os.sysconf("SC_CLK_TCK"))
    cpuacct = _job_dirs(_hierarchy(root, "cpuacct", "cpu,cpuacct", "cpuacct,cpu"))
    cpu = _job_dirs(_hierarchy(root, "cpu", "cpu,cpuacct", "cpuacct,cpu"))
    memory = _job_dirs(root / "memory")
    cpuset = _job_dirs(root / "cpuset")
    blkio = _job_dirs(root / "blkio")
    readings = []
    for job_id in sorted(set(cpuacct) | set(memory), key=lambda j: (len(j), j)):
        acct = cpuacct.get(job_id)
        usage_ns = _number(_read(acct / "cpuacct.usage")) if acct else None
        stat = _keyed(_read(acct / "cpuacct.stat")) if acct else {}
        mem = memory.get(job_id)
        io = blkio.get(job_id)
        rbytes, wbytes = (
            _blkio(_read(io / "blkio.throttle.io_service_bytes")) if io else (None, None)
        )
        limits = [
            c
            for c in (
                _cpu_list_size(_read(cpuset[job_id] / "cpuset.cpus")) if job_id in cpuset else None,
                _cfs_cores(cpu[job_id]) if job_id in cpu else None,
            )
            if c is not None
        ]
        readings.append(
            CgroupReading(
                job_id=job_id,
                usage_usec=usage_ns / 1000.0 if usage_ns is not None else None,
                user_usec=stat["user"] * 1e6 / ticks if "user" in stat else None,
                system_usec=stat["system"] * 1e6 / ticks if "system" in stat else None,
                mem_current_bytes=_number(_read(mem / "memory.usage_in_bytes")) if mem else None,
                mem_max_bytes=_limit(_read(mem / "memory.limit_in_bytes")) if mem else None,
                io_read_bytes=rbytes,
                io_write_bytes=wbytes,
                allowed_cores=float(min(limits)) if limits else None,
            )
        )
    return readings
