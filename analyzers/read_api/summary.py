"""A job's fleetscope summary for Slurm's AdminComment, and its documented encoding.

jobstats (Princeton) stores each finished job's efficiency summary in the job's AdminComment from a
slurmctld epilog, as "JS1:" + base64(gzip(JSON)), so `jobstats JOBID` and any tool reading
`sacct -o AdminComment` find it after the job is gone. fleetscope does the same with its own
prefix, so the two never read each other's: deploy/slurm/slurmctld-epilog.sh asks the read API for
`GET /v1/jobs/<id>/summary` (the JSON below) and stores

    FS1:<base64 of the gzip of the summary's UTF-8 JSON, keys sorted, no spaces>

Summary, version 2. The GPU part has jobstats' layout (its docs, "Generating Job Summaries":
`gpus`, `total_time`, and per node `gpu_utilization`, `gpu_used_memory`, `gpu_total_memory`, each
keyed by the GPU's id as a string), so a reader of jobstats summaries reads ours with the prefix
changed:

    {"v": 2, "job_id": "918273",
     "gpus": 2,                          # GPUs the job held (GPUs with samples)
     "total_time": 7190,                 # seconds from the job's first to its last GPU sample
     "nodes": {"gpu-07": {
         "gpu_utilization": {"0": 97.5, "1": 12.0},        # %, time-weighted GPU_UTIL mean
         "gpu_used_memory": {"0": 83314868224, ...},      # bytes, the peak framebuffer used
         "gpu_total_memory": {"0": 85899345920, ...}}},   # bytes, framebuffer size
     "recoverable_gpu_hours": 4.0,
     "findings": [{"rule", "severity", "gpu_hours", "title"}, ...]}

Differences from jobstats: a GPU's id is its NVML index (the bus order dcgm-exporter and
nvidia-smi use), not Slurm's id (the device minor): the prolog records the mapping
(SLURM_GPU_MAP, docs/deploy.md); there are no CPU fields (`cpus`, `total_memory`, `used_memory`,
per-node `total_time`: cgroup accounting is Slurm's own, sacct has them). A value fleetscope has
no sample for (no GPU_UTIL from a MIG instance, no framebuffer fields) is left out of its map.
`findings`: open findings only, most recoverable first, at most MAX_FINDINGS (AdminComment is a
text column; a few hundred bytes once compressed). `decode` reads it back (versions 1 and 2).
"""

from __future__ import annotations

import base64
import gzip
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

PREFIX = "FS1:"
VERSION = 2
MAX_FINDINGS = 10
MIB = 1024 * 1024


def gpu_use(conn: duckdb.DuckDBPyConnection, job_id: str) -> dict[str, Any]:
    """jobstats' GPU fields of the summary from the job's GPU samples (empty without samples)."""
    from analyzers.reports.job import summarize
    from fleetscope.errors import NotFoundError

    try:
        job = summarize(conn, job_id)
    except NotFoundError:
        return {"gpus": 0, "total_time": 0, "nodes": {}}
    totals = {
        (host, str(gpu)): total
        for host, gpu, total in conn.execute(
            "SELECT host, CASE WHEN mig_instance_id IS NULL THEN CAST(gpu_index AS VARCHAR) "
            "ELSE gpu_index || '/mig' || mig_instance_id END, max(fb_used_mib + fb_free_mib) "
            "FROM gpu_samples WHERE job_id = ? GROUP BY ALL",
            [job_id],
        ).fetchall()
    }
    nodes: dict[str, dict[str, dict[str, float | int]]] = {}
    for g in job.per_gpu:
        gpu = str(g["gpu"])
        node = nodes.setdefault(
            g["host"], {"gpu_utilization": {}, "gpu_used_memory": {}, "gpu_total_memory": {}}
        )
        if g["util_mean_all"] is not None:
            node["gpu_utilization"][gpu] = round(g["util_mean_all"], 1)
        if g["fb_used_max_mib"] is not None:
            node["gpu_used_memory"][gpu] = round(g["fb_used_max_mib"] * MIB)
        if totals.get((g["host"], gpu)) is not None:
            node["gpu_total_memory"][gpu] = round(totals[g["host"], gpu] * MIB)
    span = conn.execute(
        "SELECT epoch(max(ts)) - epoch(min(ts)) FROM gpu_samples WHERE job_id = ?", [job_id]
    ).fetchone()
    total_s = round(span[0]) if span and span[0] is not None else 0
    return {"gpus": len(job.per_gpu), "total_time": total_s, "nodes": nodes}


def summary(job: dict[str, Any], use: dict[str, Any]) -> dict[str, Any]:
    """The compact summary of analyzers.read_api.views.job_json's answer and `gpu_use`'s."""
    found = [f for f in job["findings"] if f["state"] == "open"]
    found.sort(key=lambda f: (-f["wasted_gpu_hours"], f["rule_id"]))
    return {
        "v": VERSION,
        "job_id": job["job_id"],
        **use,
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
