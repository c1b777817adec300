"""Attribution from GPU processes' environment: `SLURM_JOB_ID` plus the GPUs the job was given.

For each process in `/proc` (root injectable for tests) whose environ has SLURM_JOB_ID, the GPUs
are, in order of trust: the GPUs NVML says the process uses (`pid_gpus`, when the NVML source is
on), then SLURM_JOB_GPUS / SLURM_STEP_GPUS (physical indices set by Slurm's gres plugin), then
CUDA_VISIBLE_DEVICES (UUIDs are exact; indices are only right without cgroup device
confinement, since with it CUDA renumbers from 0 inside the job; Slurm documents this in its gres
guide). The lowest-trust source is used only if no better one exists for that process.

Cost: reading every environ is the agent's most expensive step on a busy host, so the table is
rebuilt at most every `refresh_s` seconds (injected clock).

Must never: read other processes' memory beyond `environ`, or fail on processes that vanish or
deny access (they are skipped).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

from fleetscope.attribution.base import gpu_keys
from fleetscope.normalize import GpuReading

_GPU_LIST_VARS = ("SLURM_JOB_GPUS", "SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES")


def read_environ(path: Path) -> dict[str, str]:
    try:
        raw = path.read_bytes()
    except OSError:
        return {}
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


class ProcEnviron:
    name = "proc"

    def __init__(
        self,
        proc_root: Path,
        *,
        refresh_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        pid_gpus: Callable[[], dict[int, list[str]]] | None = None,
    ) -> None:
        self.proc_root = proc_root
        self.refresh_s = refresh_s
        self._clock = clock
        self._pid_gpus = pid_gpus
        self._next_refresh = float("-inf")
        self._jobs: dict[str, str] = {}

    def refresh(self) -> None:
        now = self._clock()
        if now < self._next_refresh:
            return
        self._next_refresh = now + self.refresh_s
        by_pid = self._pid_gpus() if self._pid_gpus else {}
        jobs: dict[str, str] = {}
        try:
            pids = [int(e.name) for e in os.scandir(self.proc_root) if e.name.isdigit()]
        except OSError:
            pids = []
        for pid in sorted(pids):
            env = read_environ(self.proc_root / str(pid) / "environ")
            job = env.get("SLURM_JOB_ID")
            if not job:
                continue
            gpus = by_pid.get(pid)
            if not gpus:
                gpus = next(
                    (env[v].split(",") for v in _GPU_LIST_VARS if env.get(v, "").strip()), []
                )
            for gpu in gpus:
                gpu = gpu.strip()
                if gpu and gpu.lower() not in ("nodevfiles", "none"):
                    jobs.setdefault(gpu, job)
        self._jobs = jobs

    def job_for(self, reading: GpuReading) -> str | None:
        for key in gpu_keys(reading):
            job = self._jobs.get(key)
            if job:
                return job
        return None
