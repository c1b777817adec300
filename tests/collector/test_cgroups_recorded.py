"""Per-job cgroup readings from cgroup trees recorded on real Slurm nodes (tests/data/cgroup/,
README there): cgroup v2 (`system.slice/slurmstepd.scope/job_<id>`) and cgroup v1 (one hierarchy
per controller, `<controller>/slurm/uid_<uid>/job_<id>`). Every expected number is the recorded
file's content in the reading's unit (microseconds, bytes, cores)."""

from __future__ import annotations

import shutil
from pathlib import Path

from collector.sources.cgroups import CgroupReading, read_job_cgroups
from collector.sources.cgroups_v1 import read_v1_job_cgroups

DATA = Path(__file__).resolve().parents[1] / "data" / "cgroup"


def test_slurm_cgroup_v2_tree() -> None:
    assert read_job_cgroups(DATA / "slurm-v2") == [
        CgroupReading(
            job_id="4",
            usage_usec=126686.0,  # cpu.stat usage_usec
            user_usec=49043.0,
            system_usec=77642.0,
            mem_current_bytes=5660672.0,  # memory.current
            mem_max_bytes=1835008000.0,  # memory.max
            io_read_bytes=None,  # no io.stat at the job level in this tree
            io_write_bytes=None,
            allowed_cores=1.0,  # cpuset.cpus.effective "0"; cpu.max "max 100000" sets none
        )
    ]


V1_JOBS = [
    CgroupReading(
        job_id="10",
        usage_usec=7710.215,  # cpuacct.usage 7710215 ns
        user_usec=0.0,  # cpuacct.stat: user 0, system 0 ticks
        system_usec=0.0,
        mem_current_bytes=356352.0,  # memory.usage_in_bytes
        mem_max_bytes=2147483648.0,  # memory.limit_in_bytes
        io_read_bytes=None,  # no blkio hierarchy recorded
        io_write_bytes=None,
        allowed_cores=2.0,  # cpuset.cpus "0-1"; cpu.cfs_quota_us -1
    ),
    CgroupReading(
        job_id="11",
        usage_usec=33146523011.972,  # cpuacct.usage 33146523011972 ns
        user_usec=33135610000.0,  # 3313561 ticks at USER_HZ 100
        system_usec=95710000.0,  # 9571 ticks
        mem_current_bytes=6126714880.0,
        mem_max_bytes=191092490240.0,
        io_read_bytes=None,
        io_write_bytes=None,
        allowed_cores=40.0,  # cpuset.cpus "0-39"
    ),
]


def test_slurm_cgroup_v1_tree() -> None:
    assert read_job_cgroups(DATA / "slurm-v1") == read_v1_job_cgroups(
        DATA / "slurm-v1", ticks_per_s=100
    )
    assert read_v1_job_cgroups(DATA / "slurm-v1", ticks_per_s=100) == V1_JOBS


def test_v1_with_cpu_and_cpuacct_co_mounted_as_systemd_mounts_them(tmp_path: Path) -> None:
    """systemd mounts `cpu,cpuacct` and links `cpu` and `cpuacct` to it."""
    shutil.copytree(DATA / "slurm-v1" / "cpuacct", tmp_path / "cpu,cpuacct")
    for name in ("memory", "cpuset"):
        shutil.copytree(DATA / "slurm-v1" / name, tmp_path / name)
    (tmp_path / "cpu").symlink_to("cpu,cpuacct")
    (tmp_path / "cpuacct").symlink_to("cpu,cpuacct")
    assert read_v1_job_cgroups(tmp_path, ticks_per_s=100) == V1_JOBS
    (tmp_path / "cpu").unlink()
    (tmp_path / "cpuacct").unlink()  # without the links: found under the co-mounted name
    assert read_v1_job_cgroups(tmp_path, ticks_per_s=100) == V1_JOBS


def test_multi_slurmd_scope_and_unlimited_v1_memory(tmp_path: Path) -> None:
    shutil.copytree(
        DATA / "slurm-v2" / "system.slice" / "slurmstepd.scope",
        tmp_path / "system.slice" / "gpu07_slurmstepd.scope",
    )
    assert [r.job_id for r in read_job_cgroups(tmp_path)] == ["4"]
    v1 = tmp_path / "v1"
    shutil.copytree(DATA / "slurm-v1", v1)
    limit = v1 / "memory" / "slurm" / "uid_20821" / "job_10" / "memory.limit_in_bytes"
    limit.write_text("9223372036854771712\n")  # the kernel's "no limit" on 4 KiB pages
    assert read_v1_job_cgroups(v1, ticks_per_s=100)[0].mem_max_bytes is None
