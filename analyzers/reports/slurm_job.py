"""What `jobstats JOBID` prints about a Slurm job, read from `sacct`, for `fleetscope job`.

Princeton's jobstats opens with the job's Slurm facts (user/account, state, nodes, cores, memory,
GPUs, partition, run time and time limit) and its overall utilization: CPU time over the cores'
wall time, peak RSS over the requested memory, and GPU use. This module reads the same facts from
one `sacct -j ID -n -P --units=M -o <SACCT_FIELDS>` call (its allocation line and its steps':
TotalCPU is the allocation's, MaxRSS the largest of its steps', as jobstats takes them) and renders
them above fleetscope's own GPU summary, with the GPU use and recoverable GPU-hours fleetscope
measured. Without sacct (not a Slurm host) or for a job sacct does not know, nothing is printed.
The subprocess runner is injected: tests feed recorded sacct output.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

SACCT_FIELDS = (
    "JobID", "JobName", "User", "Account", "State", "NNodes", "NodeList", "NCPUS", "ReqMem",
    "Elapsed", "Timelimit", "TotalCPU", "MaxRSS", "Comment", "Start", "Partition", "QOS",
    "Cluster", "AllocTRES", "JobIDRaw",
)  # fmt: skip
Runner = Callable[[list[str]], str | None]


@dataclass(frozen=True)
class SlurmJob:
    job_id: str
    name: str
    user: str
    account: str
    state: str
    nodes: int
    node_list: str
    cores: int
    req_mem_mib: float | None
    elapsed_s: float
    limit_s: float | None
    total_cpu_s: float
    max_rss_mib: float | None
    start: str
    partition: str
    qos: str
    cluster: str
    gpus: int

    @property
    def cpu_frac(self) -> float | None:
        wall = self.elapsed_s * self.cores
        return self.total_cpu_s / wall if wall > 0 else None

    @property
    def mem_frac(self) -> float | None:
        if self.max_rss_mib is None or not self.req_mem_mib:
            return None
        return self.max_rss_mib / self.req_mem_mib


def run_sacct(args: list[str]) -> str | None:
    """sacct's output, or None without sacct or when it fails."""
    sacct = shutil.which("sacct")
    if sacct is None:
        return None
    try:
        done = subprocess.run(
            [sacct, *args], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def slurm_job(job_id: str, runner: Runner = run_sacct) -> SlurmJob | None:
    text = runner(["-j", job_id, "-n", "-P", "--units=M", "-o", ",".join(SACCT_FIELDS)])
    return parse_sacct(text, job_id) if text else None


def parse_sacct(text: str, job_id: str) -> SlurmJob | None:
    """The job from `sacct -n -P -o SACCT_FIELDS` lines; None when it is not among them."""
    rows = [dict(zip(SACCT_FIELDS, line.split("|"), strict=False)) for line in text.splitlines()]
    # An array task is "7_1" in JobID and its own job id (7, what SLURM_JOB_ID and the agent
    # name it) in JobIDRaw: either finds it.
    main = next((r for r in rows if job_id in (r.get("JobID"), r.get("JobIDRaw"))), None)
    if main is None:
        return None
    steps = [r for r in rows if r.get("JobID", "").startswith(main["JobID"] + ".")]
    rss = [m for r in steps if (m := mebibytes(r.get("MaxRSS", ""))) is not None]
    gpus = re.search(r"gres/gpu=(\d+)", main.get("AllocTRES", ""))
    return SlurmJob(
        job_id=main["JobID"], name=main["JobName"], user=main["User"], account=main["Account"],
        state=main["State"].split()[0] if main["State"] else "", nodes=int(main["NNodes"] or 0),
        node_list=main["NodeList"], cores=int(main["NCPUS"] or 0),
        req_mem_mib=mebibytes(main["ReqMem"]), elapsed_s=seconds(main["Elapsed"]) or 0.0,
        limit_s=seconds(main["Timelimit"]), total_cpu_s=seconds(main["TotalCPU"]) or 0.0,
        max_rss_mib=max(rss) if rss else None, start=main["Start"], partition=main["Partition"],
        qos=main["QOS"], cluster=main["Cluster"], gpus=int(gpus.group(1)) if gpus else 0,
    )  # fmt: skip


def seconds(text: str) -> float | None:
    """Slurm durations: [D-]HH:MM:SS, MM:SS(.mmm), with an optional fraction; None otherwise
    (UNLIMITED, Partition_Limit, empty)."""
    match = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)", text.strip())
    if not match:
        return None
    days, hours, minutes, secs = match.groups()
    return int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes) * 60 + float(secs)


_UNITS = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2}


def mebibytes(text: str) -> float | None:
    """'64000M', '812M', '4G', '2000Mc' (older per-core form: left as is) -> MiB; '0' -> 0."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]?)[cn]?", text.strip())
    if not match:
        return None
    return float(match.group(1)) * _UNITS.get(match.group(2) or "M", 1.0)


def _clock(total_s: float | None) -> str:
    if total_s is None:
        return "UNLIMITED"
    whole = round(total_s)
    days, rest = divmod(whole, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _bar(label: str, frac: float | None) -> str:
    if frac is None:
        return f"  {label:<17}[ n/a ]"
    pct = max(0.0, frac) * 100
    filled = min(40, round(min(pct, 100.0) * 40 / 100))
    return f"  {label:<17}[{'|' * filled}{' ' * (40 - filled)} {pct:.0f}%]"


def render(
    job: SlurmJob,
    *,
    gpu_active_frac: float | None,
    gpu_memory_peak_mib: float | None,
    recoverable_gpu_hours: float,
    open_findings: int,
) -> str:
    """jobstats' header and overall utilization, plus fleetscope's recoverable GPU-hours."""
    line = "=" * 80
    mem = f"{job.req_mem_mib / 1024:.0f}GB" if job.req_mem_mib else "-"
    rows = [
        line, "Slurm Job Statistics".center(80).rstrip(), line,
        f"         Job ID: {job.job_id}",
        f"   User/Account: {job.user}/{job.account}",
        f"       Job Name: {job.name}",
        f"          State: {job.state}",
        f"          Nodes: {job.nodes} ({job.node_list})",
        f"      CPU Cores: {job.cores}",
        f"     CPU Memory: {mem}",
        f"           GPUs: {job.gpus}",
        f"  QOS/Partition: {job.qos}/{job.partition}",
        f"        Cluster: {job.cluster}",
        f"     Start Time: {job.start}",
        f"       Run Time: {_clock(job.elapsed_s)}",
        f"     Time Limit: {_clock(job.limit_s)}",
        "", "Overall Utilization".center(80).rstrip(), line,
        _bar("CPU utilization", job.cpu_frac),
        _bar("CPU memory usage", job.mem_frac),
        _bar("GPU utilization", gpu_active_frac),
    ]  # fmt: skip
    if gpu_memory_peak_mib is not None:
        rows.append(f"  GPU memory peak  {gpu_memory_peak_mib / 1024:.1f} GiB")
    rows += [
        f"  Recoverable GPU-hours (fleetscope): {recoverable_gpu_hours:.1f} "
        f"in {open_findings} open finding(s)",
        line,
    ]
    return "\n".join(rows)


def jobstats_header(job_id: str, summary: Any, runner: Runner = run_sacct) -> str | None:
    """The jobstats block for `fleetscope job` (summary: analyzers.reports.job.JobSummary with its
    findings); None when sacct does not know the job."""
    from analyzers.reports.ranking import counted_once

    job = slurm_job(job_id, runner)
    if job is None:
        return None
    best = counted_once(
        summary.findings,
        lambda f: (job_id, (f.bucket_start or f.window_start).isoformat()),
        lambda f: f.wasted_gpu_hours,
    )
    return render(
        job,
        gpu_active_frac=summary.active_frac,
        gpu_memory_peak_mib=summary.memory_peak_mib,
        recoverable_gpu_hours=sum(f.wasted_gpu_hours for f in best),
        open_findings=len(summary.findings),
    )
