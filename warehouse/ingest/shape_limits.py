"""Per-request shape limits: how many distinct UTC days, hosts and Arrow record batches one batch
may hold before the writer accepts it.

Why: the writer's work per flush grew with the partitions a batch touched, not with its bytes
(issue 27): one 177 KB batch of 10,000 rows on 10,000 distinct days made a Parquet file and an
fsync per day and held every other agent's 202 for over 60 s; 100,000 distinct hosts in one 2.4 MB
batch held it 20 s in the catalog hooks; 5,000 one-row record batches in one stream, 25 s. With
these limits the work a batch causes before its ack is bounded by its bytes and the limits, and a
batch over one is refused (413, naming the setting) before it is queued. The checks are vectorised
Arrow kernels over the batch alone (cost linear in its rows) and run on the request's thread, never
the writer's. This module must never touch the writer's queue, a database or the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from fleetscope.settings import Settings

__all__ = ["UNLIMITED", "ShapeLimits", "shape_refusal"]

SHAPE_STATUS = 413  # the request is too large along one dimension: split it, do not retry it as is


@dataclass(frozen=True, slots=True)
class ShapeLimits:
    """The most distinct days, hosts and record batches one submitted batch may hold."""

    max_days: int
    max_hosts: int
    max_record_batches: int

    @classmethod
    def from_settings(cls, settings: Settings) -> ShapeLimits:
        w = settings.warehouse
        return cls(w.max_days_per_batch, w.max_hosts_per_batch, w.max_record_batches_per_batch)


UNLIMITED = ShapeLimits(2**62, 2**62, 2**62)


def shape_refusal(data: pa.Table, limits: ShapeLimits) -> str | None:
    """Why `data` is over a limit (naming the setting), or None when it is within all of them.

    Cheapest first: the record-batch count is metadata; hosts and days are one distinct count each.
    """
    record_batches = max((column.num_chunks for column in data.columns), default=0)
    if record_batches > limits.max_record_batches:
        return _over(
            record_batches, "Arrow record batches", limits.max_record_batches, "record_batches"
        )
    names = set(data.column_names)
    if "host" in names and data.num_rows > limits.max_hosts:
        hosts = pc.count_distinct(data.column("host"), mode="all").as_py()
        if hosts > limits.max_hosts:
            return _over(hosts, "distinct hosts", limits.max_hosts, "hosts")
    if "ts" in names and data.num_rows > limits.max_days:
        days = pc.count_distinct(_utc_days(data.column("ts")), mode="all").as_py()
        if days > limits.max_days:
            return _over(days, "distinct UTC days", limits.max_days, "days")
    return None


def _utc_days(ts: pa.ChunkedArray) -> pa.ChunkedArray:
    """Whole days since the epoch of each timestamp (UTC by construction: integer division)."""
    unit = ts.type.unit if pa.types.is_timestamp(ts.type) else "us"
    per_day = 86_400 * {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}[unit]
    ticks = pc.cast(ts, pa.int64())
    # Arrow's integer division truncates toward zero: shift times before 1970 so it floors
    shift = pc.if_else(pc.less(ticks, 0), per_day - 1, 0)
    return pc.divide(pc.subtract(ticks, shift), per_day)


def _over(count: int, what: str, limit: int, key: str) -> str:
    return (
        f"batch holds {count} {what}, over the limit of {limit} "
        f"(warehouse.max_{key}_per_batch); split it into smaller batches"
    )
