"""`fleetscope job` on a Slurm host prints what `jobstats JOBID` prints, from sacct.

Input: tests/data/slurm/sacct-918273.txt, sacct's `-n -P --units=M -o <SACCT_FIELDS>` output for a
2-GPU job in Slurm 23.02's format (allocation line, then its batch, extern and first steps). The
runner is the injected seam where sacct would run; everything after it is the real code.
Expected: TotalCPU 05:12:30 over 02:00:07 x 16 cores = 16%; peak step RSS 20480M of 64000M = 32%.
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

SACCT = (Path(__file__).resolve().parents[1] / "data" / "slurm" / "sacct-918273.txt").read_text()


def recorded(args: list[str]) -> str | None:
    assert args == ["-j", "918273", "-n", "-P", "--units=M", "-o", ",".join(SACCT_FIELDS)]
    return SACCT


def finding(rule: str, hours: float) -> Finding:
    t0 = datetime(2026, 3, 3, 8, tzinfo=UTC)
    return Finding(
        rule_id=rule, severity="warn", job_id="918273", host="della-l01g3", gpus=("0",),
        window_start=t0, window_end=t0.replace(hour=9), title="idle", recommendation="",
        wasted_gpu_hours=hours, estimate_method="",
    )  # fmt: skip


def test_the_job_facts_are_sacct_s() -> None:
    job = parse_sacct(SACCT, "918273")
    assert job is not None
    assert (job.user, job.account, job.state, job.nodes, job.cores, job.gpus) == (
        "alice", "ml-research", "COMPLETED", 1, 16, 2,
    )  # fmt: skip
    assert (job.elapsed_s, job.limit_s, job.total_cpu_s) == (7207.0, 14400.0, 18750.0)
    assert (job.req_mem_mib, job.max_rss_mib) == (64000.0, 20480.0)
    assert round(job.cpu_frac or 0, 4) == round(18750 / (7207 * 16), 4)
    assert parse_sacct(SACCT, "5") is None


def test_fleetscope_job_prints_the_jobstats_block() -> None:
    summary = SimpleNamespace(
        active_frac=0.41, memory_peak_mib=61440.0, findings=[finding("R1", 1.5), finding("R3", 1.0)]
    )
    text = jobstats_header("918273", summary, runner=recorded)
    assert text is not None
    lines = text.splitlines()
    assert lines[1].strip() == "Slurm Job Statistics"
    assert "   User/Account: alice/ml-research" in lines
    assert "          Nodes: 1 (della-l01g3)" in lines
    assert "       Run Time: 02:00:07" in lines and "     Time Limit: 04:00:00" in lines
    assert "     CPU Memory: 62GB" in lines and "           GPUs: 2" in lines
    assert "  CPU utilization  [" + "|" * 7 + " " * 33 + " 16%]" in lines
    assert "  CPU memory usage [" + "|" * 13 + " " * 27 + " 32%]" in lines
    assert "  GPU utilization  [" + "|" * 16 + " " * 24 + " 41%]" in lines
    assert "  GPU memory peak  60.0 GiB" in lines
    # R1 and R3 flag the same window: counted once, the larger estimate
    assert "  Recoverable GPU-hours (fleetscope): 1.5 in 2 open finding(s)" in lines


def test_without_sacct_nothing_is_printed() -> None:
    summary = SimpleNamespace(active_frac=None, memory_peak_mib=None, findings=[])
    assert jobstats_header("918273", summary, runner=lambda _args: None) is None


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
