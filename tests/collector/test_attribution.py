"""Each attribution path names the right job, the resolver's precedence holds, and a GPU that a
job holds while nothing runs on it (held-but-idle) is still attributed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from collector.attribution import build_resolver
from collector.attribution.mapping_dir import MappingDir
from collector.attribution.override import OverrideFile
from collector.attribution.proc_environ import ProcEnviron
from fleetscope.attribution.labels import k8s_job_id
from fleetscope.attribution.resolver import AttributionResolver
from fleetscope.errors import ConfigError
from fleetscope.exposition import parse
from fleetscope.normalize import GpuReading, normalize_samples
from fleetscope.settings import load_settings


def readings_of(text: str) -> list[GpuReading]:
    return normalize_samples(parse(text).samples, ts_ms=0, cluster="c", host="h")


def attributed(readings: list[GpuReading]) -> list[tuple[object, object]]:
    return [(r.row["job_id"], r.row["attribution"]) for r in readings]


def write_environ(root: Path, pid: int, **env: str) -> None:
    (root / str(pid)).mkdir(parents=True)
    (root / str(pid) / "environ").write_bytes(
        b"\0".join(f"{k}={v}".encode() for k, v in env.items()) + b"\0"
    )


@pytest.mark.parametrize(
    ("namespace", "pod", "job"),
    [
        ("ml", "llama-ft-worker-3", "ml/llama-ft"),
        ("ml", "llama-ft-master-0", "ml/llama-ft"),
        ("ml", "mpi-launcher-0", "ml/mpi"),
        ("ml", "web-12", "ml/web"),
        ("ml-team-a", "llama-ft-0-worker", "ml-team-a/llama-ft-0-worker"),
        ("ml", "solo", "ml/solo"),
    ],
)
def test_k8s_job_id_convention(namespace: str, pod: str, job: str) -> None:
    assert k8s_job_id(namespace, pod) == job


def test_mapping_dir_attributes_idle_gpus_by_index_and_uuid(
    tmp_path: Path, page: Callable[[str], str]
) -> None:
    # v100_legacy has no job labels at all: only the prolog's files know the allocation.
    (tmp_path / "0").write_text("5551 1000\n")  # jobstats style: "<jobid> <uid>"
    (tmp_path / "GPU-5f1c2a7e-8b3d-4c11-9e2a-000000000002").write_text("\n5552\n")  # dcgm style
    readings = readings_of(page("v100_legacy"))
    AttributionResolver([MappingDir(tmp_path)]).resolve(readings)
    assert attributed(readings) == [
        ("5551", "mapping_dir"),
        (None, None),
        ("5552", "mapping_dir"),
        (None, None),
    ]


def test_held_but_idle_gpu_is_attributed_with_zero_activity(tmp_path: Path) -> None:
    text = (
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a"} 0\n'
        'DCGM_FI_PROF_SM_ACTIVE{gpu="0",UUID="GPU-a"} 0\n'
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a"} 0\n'
    )
    (tmp_path / "0").write_text("7777\n")
    (reading,) = readings_of(text)
    AttributionResolver([MappingDir(tmp_path)]).resolve([reading])
    assert (reading.row["job_id"], reading.row["attribution"]) == ("7777", "mapping_dir")
    assert (reading.row["gpu_util"], reading.row["sm_active"]) == (0.0, 0.0)


def test_override_file_by_uuid_index_and_mig_instance(
    tmp_path: Path, page: Callable[[str], str]
) -> None:
    override = tmp_path / "override.toml"
    override.write_text(
        '[gpus]\n"GPU-5f1c2a7e-8b3d-4c11-9e2a-000000000001" = "by-uuid"\n'
        '"0" = "whole-gpu-0"\n"0:2" = "mig-0-2"\n'
    )
    readings = readings_of(page("a100_mig"))
    AttributionResolver([OverrideFile(override)]).resolve(readings)
    assert attributed(readings) == [
        ("whole-gpu-0", "override"),
        ("mig-0-2", "override"),
        ("by-uuid", "override"),
        ("by-uuid", "override"),
    ]


def test_override_file_that_is_not_toml_is_a_config_error(tmp_path: Path) -> None:
    bad = tmp_path / "override.toml"
    bad.write_text("[gpus\n")
    with pytest.raises(ConfigError, match=r"override\.toml"):
        OverrideFile(bad)


def test_proc_environ_uses_slurm_gpu_lists_and_nvml_pids(
    tmp_path: Path, page: Callable[[str], str]
) -> None:
    proc = tmp_path / "proc"
    write_environ(proc, 101, SLURM_JOB_ID="8001", SLURM_JOB_GPUS="0,1", CUDA_VISIBLE_DEVICES="0,1")
    # Under cgroup confinement CUDA renumbers from 0; a UUID list is exact.
    write_environ(
        proc,
        102,
        SLURM_JOB_ID="8002",
        CUDA_VISIBLE_DEVICES="GPU-5f1c2a7e-8b3d-4c11-9e2a-000000000002",
    )
    write_environ(proc, 103, SLURM_JOB_ID="8003", CUDA_VISIBLE_DEVICES="0")  # NVML says GPU 3
    write_environ(proc, 104, HOME="/root")  # not a job
    (proc / "105").mkdir()  # vanished or unreadable process: skipped
    (proc / "self").mkdir()
    source = ProcEnviron(proc, pid_gpus=lambda: {103: ["GPU-5f1c2a7e-8b3d-4c11-9e2a-000000000003"]})
    readings = readings_of(page("v100_legacy"))
    AttributionResolver([source]).resolve(readings)
    assert attributed(readings) == [
        ("8001", "proc"),
        ("8001", "proc"),
        ("8002", "proc"),
        ("8003", "proc"),
    ]


def test_proc_environ_rescans_only_after_its_refresh_interval(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    write_environ(proc, 1, SLURM_JOB_ID="1", SLURM_STEP_GPUS="0")
    now = [0.0]
    source = ProcEnviron(proc, refresh_s=30.0, clock=lambda: now[0])
    (reading,) = readings_of('DCGM_FI_DEV_GPU_UTIL{gpu="0"} 1\n')
    source.refresh()
    assert source.job_for(reading) == "1"
    (proc / "1" / "environ").write_bytes(b"SLURM_JOB_ID=2\0SLURM_STEP_GPUS=0\0")
    now[0] = 29.0
    source.refresh()
    assert source.job_for(reading) == "1"
    now[0] = 30.0
    source.refresh()
    assert source.job_for(reading) == "2"


def test_precedence_override_then_mapping_then_labels_then_proc(
    tmp_path: Path, page: Callable[[str], str]
) -> None:
    # h100_slurm_main: hpc_job 918273 on GPUs 0-3, 918274 on GPUs 4-7.
    (tmp_path / "override.toml").write_text('[gpus]\n"0" = "ovr"\n')
    (tmp_path / "map").mkdir()
    (tmp_path / "map" / "0").write_text("map0\n")
    (tmp_path / "map" / "1").write_text("map1\n")
    proc = tmp_path / "proc"
    write_environ(proc, 9, SLURM_JOB_ID="proc", SLURM_JOB_GPUS="0,1,2,3,4,5,6,7")
    settings = load_settings(env={}).with_overrides(
        agent__attribution_override=str(tmp_path / "override.toml"),
        agent__job_mapping_dir=str(tmp_path / "map"),
        agent__proc_root=str(proc),
    )
    resolver = build_resolver(settings)
    assert [s.name for s in resolver.sources] == [
        "override",
        "mapping_dir",
        "pod_resources",  # default socket path set; absent here, so it names nothing
        "hpc_job",
        "k8s",
        "proc",
    ]
    readings = readings_of(page("h100_slurm_main"))
    resolver.resolve(readings)
    assert attributed(readings)[:3] == [
        ("ovr", "override"),
        ("map1", "mapping_dir"),
        ("918273", "hpc_job"),
    ]
    # Without exporter labels the processes' environment is the last resort.
    bare = readings_of('DCGM_FI_DEV_GPU_UTIL{gpu="5"} 1\n')
    resolver.resolve(bare)
    assert attributed(bare) == [("proc", "proc")]
