"""`fleetscope job` on a Slurm host prints what `jobstats JOBID` prints, from sacct.

Input: sacct's `-n -P --units=M -o <SACCT_FIELDS>` output recorded from a real Slurm 22.05 with
slurmdbd (tests/data/slurm/recorded/README.md): job 1, 2 GPUs and 2 cores, a batch step and one
srun step (python3, 25 s of busy loop holding 300 MiB); jobs 7 and 8, the two tasks of array 7
(7_1 is job 7, 7_0 is job 8). The runner is the injected seam where sacct would run; everything
after it is the real code. Expected for job 1: TotalCPU 00:08.421 over 00:00:25 x 2 cores = 17%;
peak step RSS 307.85M of 800M = 38%.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzers.findings import Finding
from analyzers.reports.slurm_job import (
    SACCT_FIELDS,
    jobstats_header,
    mebibytes,
    parse_sacct,
    seconds,
)

RECORDED = Path(__file__).resolve().parents[1] / "data" / "slurm" / "recorded"
SACCT = (RECORDED / "sacct_1.txt").read_text()


def recorded(args: list[str]) -> str | None:
    """sacct as the recording ran it: `sacct -j ID -n -P --units=M -o <SACCT_FIELDS>`."""
    assert args[:1] == ["-j"] and args[2:] == [
        "-n",
        "-P",
        "--units=M",
        "-o",
        ",".join(SACCT_FIELDS),
    ]
    return (RECORDED / f"sacct_{args[1]}.txt").read_text()


def finding(rule: str, hours: float) -> Finding:
    t0 = datetime(2026, 3, 3, 8, tzinfo=UTC)
    return Finding(
        rule_id=rule, severity="warn", job_id="1", host="vm", gpus=("0",),
        window_start=t0, window_end=t0.replace(hour=9), title="idle", recommendation="",
        wasted_gpu_hours=hours, estimate_method="",
    )  # fmt: skip


def test_the_job_facts_are_sacct_s() -> None:
    job = parse_sacct(SACCT, "1")
    assert job is not None
    assert (job.name, job.user, job.account, job.state, job.nodes, job.cores, job.gpus) == (
        "llama-ft", "alice", "ml-research", "COMPLETED", 1, 2, 2,
    )  # fmt: skip
    assert (job.elapsed_s, job.limit_s, job.total_cpu_s) == (25.0, 3600.0, 8.421)
    assert (job.req_mem_mib, job.max_rss_mib) == (800.0, 307.85)  # the srun step's peak
    assert (job.partition, job.qos, job.cluster, job.node_list) == ("gpu", "normal", "della", "vm")
    assert round(job.cpu_frac or 0, 4) == round(8.421 / (25 * 2), 4)
    assert parse_sacct(SACCT, "5") is None


def test_an_array_task_is_found_by_its_own_job_id() -> None:
    """SLURM_JOB_ID of task 7_1 is 7 and of 7_0 is 8: sacct's JobIDRaw, not its JobID."""
    task = parse_sacct((RECORDED / "sacct_7.txt").read_text(), "7")
    assert task is not None
    assert (task.job_id, task.name, task.cores, task.gpus, task.max_rss_mib) == (
        "7_1", "sweep", 1, 1, 3.09,
    )  # fmt: skip
    other = parse_sacct((RECORDED / "sacct_8.txt").read_text(), "8")
    assert other is not None and (other.job_id, other.max_rss_mib) == ("7_0", 3.15)
    assert parse_sacct((RECORDED / "sacct_7.txt").read_text(), "7_0") is not None


def test_fleetscope_job_prints_the_jobstats_block() -> None:
    summary = SimpleNamespace(
        active_frac=0.41, memory_peak_mib=61440.0, findings=[finding("R1", 1.5), finding("R3", 1.0)]
    )
    text = jobstats_header("1", summary, runner=recorded)
    assert text is not None
    lines = text.splitlines()
    assert lines[1].strip() == "Slurm Job Statistics"
    assert "         Job ID: 1" in lines
    assert "   User/Account: alice/ml-research" in lines
    assert "       Job Name: llama-ft" in lines and "          State: COMPLETED" in lines
    assert "          Nodes: 1 (vm)" in lines and "      CPU Cores: 2" in lines
    assert "       Run Time: 00:00:25" in lines and "     Time Limit: 01:00:00" in lines
    assert "     CPU Memory: 1GB" in lines and "           GPUs: 2" in lines
    assert "  QOS/Partition: normal/gpu" in lines and "        Cluster: della" in lines
    assert "     Start Time: 2026-11-28T22:17:45" in lines
    assert "  CPU utilization  [" + "|" * 7 + " " * 33 + " 17%]" in lines
    assert "  CPU memory usage [" + "|" * 15 + " " * 25 + " 38%]" in lines
    assert "  GPU utilization  [" + "|" * 16 + " " * 24 + " 41%]" in lines
    assert "  GPU memory peak  60.0 GiB" in lines
    # R1 and R3 flag the same window: counted once, the larger estimate
    assert "  Recoverable GPU-hours (fleetscope): 1.5 in 2 open finding(s)" in lines


def test_without_sacct_nothing_is_printed() -> None:
    summary = SimpleNamespace(active_frac=None, memory_peak_mib=None, findings=[])
    assert jobstats_header("1", summary, runner=lambda _args: None) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [("02:00:07", 7207.0), ("1-00:00:01", 86401.0), ("12:34.567", 754.567), ("UNLIMITED", None),
     ("Partition_Limit", None), ("", None)],
)  # fmt: skip
def test_slurm_durations(text: str, expected: float | None) -> None:
    assert seconds(text) == expected


@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_every_day_hour_minute_second_reads_back(d: int, h: int, m: int, s: int) -> None:
    assert seconds(f"{d}-{h:02d}:{m:02d}:{s:02d}") == d * 86400 + h * 3600 + m * 60 + s


def test_memory_units() -> None:
    assert [mebibytes(t) for t in ("64000M", "4G", "512K", "0", "16Gn", "x")] == [
        64000.0, 4096.0, 0.5, 0.0, 16384.0, None,
    ]  # fmt: skip
