"""One count-once rule for recoverable GPU-hours (`ranking.counted_once`): the weekly report's
totals from catalog rows equal `fleetscope opportunities`' from the same findings."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pandas as pd

from analyzers.findings import Finding
from analyzers.reports.build import deduplicated_waste
from analyzers.reports.ranking import rank

BUCKET = datetime(2026, 11, 16, 8, tzinfo=UTC)


def finding(rule: str, job: str | None, hours: float, start_h: float, host: str = "h1") -> Finding:
    start = BUCKET + timedelta(hours=start_h)
    return Finding(
        rule_id=rule, severity="warn", job_id=job, host=host, gpus=(), window_start=start,
        window_end=start + timedelta(hours=1), title=rule, recommendation="",
        wasted_gpu_hours=hours, estimate_method="", bucket_start=BUCKET,
    )  # fmt: skip


def rows(findings: list[Finding]) -> pd.DataFrame:
    """The catalog's rows: the bucket travels in the evidence's _meta, as analyzers.run.results
    stores it."""
    return pd.DataFrame(
        [
            {
                "finding_id": f.finding_id,
                "rule_id": f.rule_id,
                "job_id": f.job_id,
                "window_start": pd.Timestamp(f.window_start),
                "wasted_gpu_hours": f.wasted_gpu_hours,
                "evidence": {"_meta": {"bucket_start": BUCKET.isoformat()}},
            }
            for f in findings
        ]
    )


def test_the_report_and_the_ranking_count_a_job_once_per_bucket() -> None:
    findings = [
        finding("R1", "idle", 2.0, 0),
        finding("R3", "idle", 3.0, 0.5),  # the same job and bucket, a later window
        finding("P1", "starved", 1.5, 0),
        finding("R17", None, 0.25, 0, host="h1"),  # no job: each host's finding its own
        finding("R17", None, 0.5, 0, host="h2"),
    ]
    assert rank(findings).total_gpu_hours == 3.0 + 1.5 + 0.25 + 0.5
    assert deduplicated_waste(rows(findings)) == rank(findings).total_gpu_hours
    assert deduplicated_waste(rows([])) == 0.0
