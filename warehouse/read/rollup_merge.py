"""How usage roll-up rows are computed, merged and read back, the same in embedded and fleet mode.

A usage row (`gpu_samples_1m`, `gpu_samples_1h`) keeps, per column of `ROLLUP_COLUMNS`, the mean
and max a reader charts plus the sum and the count of the values that were not blank
(`<column>_sum`, `<column>_n`). Those two make rows mergeable: samples that arrive after their
bucket was rolled up (a spool replayed weeks later, an import) join its row as counts and sums
added, maxima maxed and the mean recomputed as sum / count, so the merged row is the roll-up of all
the bucket's samples taken together. Counts and maxima are exact; sums are added as doubles, exact
whenever the values are (binary fractions such as 0.25), else to the last bits of rounding order,
as any parallel sum is. The mean is sum / count everywhere, raw roll-up and merge alike.

They are also what a reader weighs by: a column blank in some samples of a bucket (an exporter
that stops reporting SM_ACTIVE half-way through an hour, a scrape without the DCGM_FI_PROF_*
fields) is known for `<column>_n` samples, not for the row's `samples`.

`COUNTED` figures are per-sample expressions over several columns, kept as a sum and count only:
`active`, the accounting's active fraction (GR_ENGINE_ACTIVE, else GPU_UTIL / 100, chosen per
sample; rules.md). Per-column sums cannot give it when both columns are blank in some samples:
which samples fell back to GPU_UTIL, and at what value, is lost once they are summed apart.

Rows written before a statistic existed read it as null, and `stored_sums` reads it back by the
rule each layout allows:
- before per-column sums (roll-up format 1): every sample of the row is taken to have the column
  when its mean is set (count = `samples`, sum = `mean * samples`), the assumption the accounting
  made of every roll-up row before;
- before `active` (format 2): the row's GR_ENGINE_ACTIVE sum and count where the row has any
  GR_ENGINE_ACTIVE, else its GPU_UTIL sum / 100 and count. Exact unless GR_ENGINE_ACTIVE was blank
  in only part of the row's samples; then the samples without it are not counted (the raw
  definition would count those with GPU_UTIL at GPU_UTIL / 100).
Merges and readers use the same rule, so an old row means the same everywhere.

This module only writes SQL over relations its caller names; it must never import pyiceberg (the
embedded warehouse does not install the fleet extra).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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

# The accounting's active fraction of one sample (rules.md; analyzers.accounting.sql states it for
# readers of raw samples, a layer above).
ACTIVE_FRACTION: Final = "coalesce(gr_engine_active, gpu_util / 100.0)"

# Per-sample figures kept as `<name>_sum` and `<name>_n` only: name -> expression over a sample.
COUNTED: Final[Mapping[str, str]] = {"active": ACTIVE_FRACTION}

MERGE_COLUMNS: Final = tuple(f"{c}_{s}" for c in (*ROLLUP_COLUMNS, *COUNTED) for s in ("sum", "n"))


def usage_stats(sum_of: str, n_of: str, max_of: str, counted: Mapping[str, str]) -> str:
    """Every column's mean and max, then every column's and every `counted` figure's sum and count
    (the row's layout), from raw columns (`sum({c})`, `count({c})`, `max({c})`) or from partial
    rows; `counted` maps each figure of `COUNTED` to what `{c}` stands for."""
    sums = [(c, c) for c in ROLLUP_COLUMNS] + list(counted.items())
    return ", ".join(
        f"CAST({sum_of.format(c=c)} AS DOUBLE) / nullif({n_of.format(c=c)}, 0) AS {c}_mean, "
        f"{max_of.format(c=c)} AS {c}_max"
        for c in ROLLUP_COLUMNS
    ) + ", " + ", ".join(
        f"CAST({sum_of.format(c=of)} AS DOUBLE) AS {name}_sum, "
        f"CAST(coalesce({n_of.format(c=of)}, 0) AS BIGINT) AS {name}_n"
        for name, of in sums
    )  # fmt: skip


def raw_usage_stats() -> str:
    """`usage_stats` over raw gpu_samples columns."""
    return usage_stats("sum({c})", "count({c})", "max({c})", COUNTED)


def _count(column: str) -> str:
    """A column's count of values in a stored row, a row from before the counts included."""
    return f"coalesce({column}_n, CASE WHEN {column}_mean IS NULL THEN 0 ELSE samples END)"


def _sum(column: str) -> str:
    """A column's sum in a stored row, a row from before the sums included."""
    return f"coalesce({column}_sum, {column}_mean * samples)"


_ENGINE_N, _UTIL_N = _count("gr_engine_active"), _count("gpu_util")

# What a row written before a `COUNTED` figure existed is taken to hold of it: (count, sum).
_BEFORE_COUNTED: Final[Mapping[str, tuple[str, str]]] = {
    "active": (
        f"CASE WHEN {_ENGINE_N} > 0 THEN {_ENGINE_N} ELSE {_UTIL_N} END",
        f"CASE WHEN {_ENGINE_N} > 0 THEN {_sum('gr_engine_active')} "
        f"ELSE {_sum('gpu_util')} / 100.0 END",
    ),
}


def stored_sums(columns: Sequence[str]) -> str:
    """`<c>_n, <c>_sum` of a stored usage row of any layout, for each of `columns` (names of
    `ROLLUP_COLUMNS` or `COUNTED`), by the rules of the module docstring."""
    parts = []
    for c in columns:
        count, total = _count(c), _sum(c)
        if c in _BEFORE_COUNTED:
            before_n, before_sum = _BEFORE_COUNTED[c]
            count, total = f"coalesce({c}_n, {before_n})", f"coalesce({c}_sum, {before_sum})"
        parts.append(f"{count} AS {c}_n, {total} AS {c}_sum")
    return ", ".join(parts)


def usage_merge_sql(stored: str, rolled: str, key: Sequence[str], order: str) -> str:
    """One row per `key` from `stored` rows (old ones read as the module docstring says) and
    `rolled` rows of samples not in `stored`, each the roll-up of both rows' samples."""
    maxima = ", ".join(f"{c}_max" for c in ROLLUP_COLUMNS)
    keys = ", ".join(key)
    stats = usage_stats(
        "sum({c}_sum)", "sum({c}_n)", "max({c}_max)", {name: name for name in COUNTED}
    )
    return (
        f"WITH parts AS (SELECT {keys}, samples, {stored_sums((*ROLLUP_COLUMNS, *COUNTED))}, "
        f"{maxima} FROM {stored} "
        f"UNION ALL BY NAME SELECT * FROM {rolled}) "
        f"SELECT {keys}, CAST(sum(samples) AS BIGINT) AS samples, {stats} "
        f"FROM parts GROUP BY ALL {order}"
    )
