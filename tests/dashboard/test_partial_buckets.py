"""Partial buckets are drawn as partial (issue 31): a bucket the data covers only in part, the
fleet's first or the newest, is marked; a GPU that changed jobs inside a bucket is not."""

from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from dashboard import partial

T0 = pd.Timestamp("2026-11-16 08:00", tz="UTC")


def _rows(*rows: tuple[int, int, str | None, int]) -> pd.DataFrame:
    """(bucket offset in minutes, GPU, job, samples at 5 s) per row; one host."""
    return pd.DataFrame(
        {
            "bucket": [T0 + pd.Timedelta(minutes=m) for m, _g, _j, _n in rows],
            "host": "h1",
            "gpu_index": [g for _m, g, _j, _n in rows],
            "job_id": [j for _m, _g, j, _n in rows],
            "samples": [n for _m, _g, _j, n in rows],
            "interval_s": 5.0,
        }
    )


def test_first_bucket_of_a_fleet_that_started_mid_minute_is_partial() -> None:
    buckets = _rows((0, 0, "a", 4), (0, 1, "b", 4), (1, 0, "a", 12), (1, 1, "b", 12))
    share = partial.coverage(buckets, 60)
    assert share.tolist() == [20 / 60, 1.0]
    frame = pd.DataFrame({"bucket": [T0, T0 + pd.Timedelta(minutes=1)], "gpu_h": [0.1, 0.3]})
    marked = partial.mark(frame, buckets, 60, None)
    assert marked["partial"].tolist() == [True, False]
    assert marked["covered_pct"].round(1).tolist() == [33.3, 100.0]


def test_a_gpu_that_changed_jobs_inside_a_bucket_covers_it_whole() -> None:
    buckets = _rows((0, 0, "a", 6), (0, 0, "b", 6), (0, 1, None, 12))
    assert partial.coverage(buckets, 60).tolist() == [1.0]


def test_the_newest_bucket_is_cut_at_the_windows_end() -> None:
    buckets = _rows((0, 0, "a", 12), (1, 0, "a", 12))
    end = datetime(2026, 11, 16, 8, 1, 15, tzinfo=UTC)  # 15 s into the second minute
    assert partial.coverage(buckets, 60, end).tolist() == [1.0, 0.25]
