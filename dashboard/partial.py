"""Which time buckets of a page's charts hold only part of their time, so they are drawn as
partial (hollow) instead of reading as a drop, or the next bucket as a doubling (issue 31).

A bucket is partial when the data covers less than `FULL_SHARE` of it: the newest bucket (the
window ends at the newest sample, mid-bucket) and the first one of a fleet that started reporting
inside it. Coverage is measured from the accounted buckets themselves: a GPU covered `samples x
interval_s` seconds of a bucket (summed over the jobs it held there), and the bucket's coverage is the median over its GPUs (robust to
one GPU whose rows were merged or whose interval was guessed); the newest bucket is cut at the
window's end. Pure: frames in, frames out.
"""

from __future__ import annotations

from datetime import datetime

import pandas as pd

FULL_SHARE = 0.9  # a bucket 90 % covered reads as whole (one missed scrape of ten is not partial)


def coverage(buckets: pd.DataFrame, bucket_s: int, end: datetime | None = None) -> pd.Series:
    """Share of each bucket (index: bucket start) the data covers, 0-1."""
    if buckets.empty:
        return pd.Series(dtype="float64")
    # per GPU first: a GPU that changed jobs inside the bucket has a row per job
    covered = buckets.assign(covered_s=buckets["samples"].astype("float64") * buckets["interval_s"])
    per_gpu = covered.groupby(["bucket", "host", "gpu_index"], dropna=False)["covered_s"].sum()
    seconds = per_gpu.groupby(level="bucket").median()
    share = (seconds / bucket_s).clip(upper=1.0)
    if end is not None:
        stamp = pd.Timestamp(end)
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp.tz_convert("UTC")
        open_s = ((stamp - share.index.to_series()).dt.total_seconds() / bucket_s).clip(0.0, 1.0)
        share = share.combine(open_s, min)
    return share


def mark(
    frame: pd.DataFrame, buckets: pd.DataFrame, bucket_s: int, end: datetime | None
) -> pd.DataFrame:
    """`frame` (with a `bucket` column) plus `covered_pct` and `partial` per bucket."""
    return marked(frame, coverage(buckets, bucket_s, end))


def marked(frame: pd.DataFrame, share: pd.Series) -> pd.DataFrame:
    """`mark` with the buckets' `coverage` computed once for every chart of a page."""
    covered = frame["bucket"].map(share).fillna(1.0)
    return frame.assign(covered_pct=100.0 * covered, partial=covered < FULL_SHARE)
