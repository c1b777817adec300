"""A job's fleetscope summary for Slurm's AdminComment, and its documented encoding.

jobstats (Princeton) stores each finished job's efficiency summary in the job's AdminComment from a
slurmctld epilog, as "JS1:" + base64(gzip(JSON)), so `jobstats JOBID` and any tool reading
`sacct -o AdminComment` find it after the job is gone. fleetscope does the same with its own
prefix, so the two never read each other's: deploy/slurm/slurmctld-epilog.sh asks the read API for
`GET /v1/jobs/<id>/summary` (the JSON below) and stores

    FS1:<base64 of the gzip of the summary's UTF-8 JSON>

Summary (version 1): {"v": 1, "job_id", "gpus": ["host:nvml index", ...], "recoverable_gpu_hours",
"findings": [{"rule", "severity", "gpu_hours", "title"}, ...]} with open findings only, most
recoverable first, at most MAX_FINDINGS of them (AdminComment is a text column; a few hundred
bytes once compressed). `decode` reads it back.
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

PREFIX = "FS1:"
MAX_FINDINGS = 10


def summary(job: dict[str, Any]) -> dict[str, Any]:
    """The compact summary of analyzers.read_api.views.job_json's answer."""
    found = [f for f in job["findings"] if f["state"] == "open"]
    found.sort(key=lambda f: (-f["wasted_gpu_hours"], f["rule_id"]))
    return {
        "v": 1,
        "job_id": job["job_id"],
        "gpus": [f"{g['host']}:{g['gpu_index']}" for g in job["gpus"]],
        "recoverable_gpu_hours": round(job["recoverable_gpu_hours"], 2),
        "findings": [
            {
                "rule": f["rule_id"],
                "severity": f["severity"],
                "gpu_hours": round(f["wasted_gpu_hours"], 2),
                "title": f["title"],
            }
            for f in found[:MAX_FINDINGS]
        ],
    }


def encode(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    return PREFIX + base64.b64encode(gzip.compress(raw, mtime=0)).decode()


def decode(text: str) -> dict[str, Any]:
    """The summary in an AdminComment; ValueError when it holds no fleetscope summary."""
    if not text.startswith(PREFIX):
        raise ValueError("not a fleetscope summary (no FS1: prefix)")
    found: dict[str, Any] = json.loads(gzip.decompress(base64.b64decode(text[len(PREFIX) :])))
    return found
