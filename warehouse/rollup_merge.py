"""How usage roll-up rows are computed and merged, the same in embedded and fleet mode.

A usage row (`gpu_samples_1m`, `gpu_samples_1h`) keeps, per column of `ROLLUP_COLUMNS`, the mean
and max a reader charts plus the sum and the count of the values that were not blank
(`<column>_sum`, `<column>_n`). Those two make rows mergeable: samples that arrive after their
bucket was rolled up (a spool replayed weeks later, an import) join its row as counts and sums
added, maxima maxed and the mean recomputed as sum / count, so the merged row is the roll-up of all
the bucket's samples taken together. Counts and maxima are exact; sums are added as doubles, exact
whenever the values are (binary fractions such as 0.25), else to the last bits of rounding order,
as any parallel sum is. The mean is sum / count everywhere, raw roll-up and merge alike.

A row written before the two columns existed reads them as null and is taken as if every one of
its samples had the column when its mean is set (count = `samples`, sum = `mean * samples`), the
assumption the accounting makes of every roll-up row (analyzers.accounting.usage).

This module only writes SQL over relations its caller names; it must never import pyiceberg (the
embedded warehouse does not install the fleet extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

# The columns analyzers and the dashboard aggregate over time: utilisation, memory, power,
# temperature, clocks and interconnect traffic. Counters and bitmasks are not averaged.
ROLLUP_COLUMNS: Final = (
    "gpu_util",
    "gr_engine_active",
    "sm_active",
    "sm_occupancy",
    "tensor_active",
    "dram_active",
    "fp16_active",
    "fp32_active",
    "fp64_active",
    "mem_copy_util",
    "fb_used_mib",
    "power_w",
    "temp_c",
    "sm_clock_mhz",
    "pcie_tx_bytes_s",
    "pcie_rx_bytes_s",
    "nvlink_tx_bytes_s",
    "nvlink_rx_bytes_s",
)

MERGE_COLUMNS: Final = tuple(f"{c}_{s}" for c in ROLLUP_COLUMNS for s in ("sum", "n"))


def usage_stats(sum_of: str, n_of: str, max_of: str) -> str:
    """Every column's mean and max, then every column's sum and count (the row's layout), from
    raw columns (`sum({c})`, `count({c})`, `max({c})`) or from partial rows."""
    return ", ".join(
        f"CAST({sum_of.format(c=c)} AS DOUBLE) / nullif({n_of.format(c=c)}, 0) AS {c}_mean, "
        f"{max_of.format(c=c)} AS {c}_max"
        for c in ROLLUP_COLUMNS
    ) + ", " + ", ".join(
        f"CAST({sum_of.format(c=c)} AS DOUBLE) AS {c}_sum, "
        f"CAST(coalesce({n_of.format(c=c)}, 0) AS BIGINT) AS {c}_n"
        for c in ROLLUP_COLUMNS
    )  # fmt: skip


def raw_usage_stats() -> str:
    """`usage_stats` over raw gpu_samples columns."""
    return usage_stats("sum({c})", "count({c})", "max({c})")


def usage_merge_sql(stored: str, rolled: str, key: Sequence[str], order: str) -> str:
    """One row per `key` from `stored` rows (old ones read as the module docstring says) and
    `rolled` rows of samples not in `stored`, each the roll-up of both rows' samples."""
    legacy = ", ".join(
        f"coalesce({c}_n, CASE WHEN {c}_mean IS NULL THEN 0 ELSE samples END) AS {c}_n, "
        f"coalesce({c}_sum, {c}_mean * samples) AS {c}_sum, {c}_max"
        for c in ROLLUP_COLUMNS
    )
    keys = ", ".join(key)
    stats = usage_stats("sum({c}_sum)", "sum({c}_n)", "max({c}_max)")
    return (
        f"WITH parts AS (SELECT {keys}, samples, {legacy} FROM {stored} "
        f"UNION ALL BY NAME SELECT * FROM {rolled}) "
        f"SELECT {keys}, CAST(sum(samples) AS BIGINT) AS samples, {stats} "
        f"FROM parts GROUP BY ALL {order}"
    )
