"""Per-job CPU, memory and disk I/O from cgroup v2 (and v1: cgroups_v1.py), for Slurm jobs here.

Where Slurm puts a job's cgroup under cgroup v2 (slurm.conf CgroupPlugin=cgroup/v2, documented in
Slurm's cgroup_v2 guide): `<root>/system.slice/slurmstepd.scope/job_<id>/`, or
`<root>/system.slice/<nodename>_slurmstepd.scope/job_<id>/` when several slurmd run on one host. Files read, as the
kernel's cgroup-v2 documentation defines them: `cpu.stat` (usage_usec, user_usec, system_usec:
microseconds), `memory.current` and `memory.max` (bytes, or "max"), `io.stat` (rbytes=, wbytes=
per device), and what the job may use of the CPU: `cpuset.cpus.effective` (a CPU list such as
"0-3,8-11": Slurm's task/affinity binds a job to its allocated cores) and `cpu.max` ("$MAX
$PERIOD" microseconds, or "max $PERIOD": a quota in cores). The root is injectable
(`agent.cgroup_root`) so tests use a fake tree.

Must never: write to the cgroup tree or fail when a job ends between listing and reading.
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

SLURM_JOB_DIRS = ("system.slice/slurmstepd.scope", "slurm")


def _quota_cores(text: str | None) -> float | None:
    """Cores of a `cpu.max` quota ("200000 100000" -> 2.0); None for "max" or unreadable."""
    parts = (text or "").split()
    if len(parts) != 2 or parts[0] == "max":
        return None
    try:
        quota, period = float(parts[0]), float(parts[1])
    except ValueError:
        return None
    return quota / period if period > 0 else None


def allowed_cores(job_dir: Path) -> float | None:
    """What a job's cgroup lets it use of the CPU, in cores: the smaller of its cpuset and its
    quota, or None when neither limits it."""
    limits = [
        c
        for c in (
            _cpu_list_size(_read(job_dir / "cpuset.cpus.effective")),
            _quota_cores(_read(job_dir / "cpu.max")),
        )
        if c is not None
    ]
    return float(min(limits)) if limits else None


def _io_totals(text: str | None) -> tuple[float | None, float | None]:
    if text is None:
        return None, None
    read = write = 0.0
    for line in text.splitlines():
        for item in line.split()[1:]:
            key, _, value = item.partition("=")
            if key in ("rbytes", "wbytes") and value.isdigit():
                if key == "rbytes":
                    read += float(value)
                else:
                    write += float(value)
    return read, write


def _v2_parents(root: Path) -> list[Path]:
    multi = sorted((root / "system.slice").glob("*_slurmstepd.scope"))
    return [root / parent for parent in SLURM_JOB_DIRS] + multi


def read_job_cgroups(root: Path) -> list[CgroupReading]:
    """One reading per Slurm job: cgroup v2's `job_<id>` folders, else cgroup v1's hierarchies."""
    readings = _read_v2(root)
    if readings:
        return readings
    from collector.sources.cgroups_v1 import read_v1_job_cgroups

    return read_v1_job_cgroups(root)


def _read_v2(root: Path) -> list[CgroupReading]:
    readings: list[CgroupReading] = []
    for base in _v2_parents(root):
        try:
            entries = sorted(e.name for e in os.scandir(base) if e.is_dir())
        except OSError:
            continue
        for name in entries:
            if not name.startswith("job_"):
                continue
            job = base / name
            cpu = _keyed(_read(job / "cpu.stat"))
            rbytes, wbytes = _io_totals(_read(job / "io.stat"))
            readings.append(
                CgroupReading(
                    job_id=name[4:],
                    usage_usec=cpu.get("usage_usec"),
                    user_usec=cpu.get("user_usec"),
                    system_usec=cpu.get("system_usec"),
                    mem_current_bytes=_number(_read(job / "memory.current")),
                    mem_max_bytes=_number(_read(job / "memory.max")),
                    io_read_bytes=rbytes,
                    io_write_bytes=wbytes,
                    allowed_cores=allowed_cores(job),
                )
            )
    return readings
