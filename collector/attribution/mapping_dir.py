"""Slurm job mapping folder: one file per GPU, named by its index or UUID, holding the job id.

The layout dcgm-exporter reads with `--hpc-job-mapping-dir` (files named by GPU index, one job id
per line) and Princeton's jobstats writes from its prolog (`/run/gpustat/<index or MIG-UUID>`,
"<jobid> <uid>"). We read the first token of the first non-empty line. A MIG instance may have its
own file: `<index>.<GPU_I_ID>` as dcgm-exporter names it (internal/pkg/transformation/hpc.go), or
`<index>:<GPU_I_ID>` (base.gpu_keys). The prolog writes the file when the job starts
and the epilog removes it, so the file is there while the job holds the GPU, busy or idle.

Must never: follow the folder's contents outside it (names are matched, never joined blindly).
"""

from __future__ import annotations

import os
from pathlib import Path

from fleetscope.attribution.base import gpu_keys
from fleetscope.normalize import GpuReading


def read_job_file(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split()
        if fields:
            return fields[0]
    return None


class MappingDir:
    name = "mapping_dir"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._jobs: dict[str, str] = {}

    def refresh(self) -> None:
        jobs: dict[str, str] = {}
        try:
            entries = list(os.scandir(self.path))
        except OSError:
            entries = []
        for entry in entries:
            if entry.is_file():
                job = read_job_file(Path(entry.path))
                if job:
                    jobs[entry.name] = job
        self._jobs = jobs

    def job_for(self, reading: GpuReading) -> str | None:
        if not self._jobs:  # nothing to match: skip building the reading's keys (per GPU per tick)
            return None
        for key in gpu_keys(reading):
            job = self._jobs.get(key) or self._jobs.get(key.replace(":", "."))
            if job:
                return job
        return None
