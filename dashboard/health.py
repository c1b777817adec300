"""The hosts page's health statistics per GPU (XID, ECC, throttling, temperature), read from raw
samples or from the health roll-ups (`warehouse.read.rollups`). Split out of dashboard/data.py, which
re-exports `host_health` so pages and tests read every number through one module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from analyzers.accounting.usage import query
from analyzers.run.window import Window
from dashboard import tiles

# -- hosts --------------------------------------------------------------------------------------

if TYPE_CHECKING:
    import duckdb


# The hosts page's health statistics per GPU, from raw samples or from the health roll-ups
# (`warehouse.read.rollups`): every one is a count, min or max, so tiles of either combine exactly.
_HEALTH_COUNTERS = (
    "ecc_dbe_total",
    "pcie_replay_total",
    "power_violation_us",
    "thermal_violation_us",
)
_HEALTH_RAW = ", ".join(
    [
        "max(ts) AS last_ts",
        "count(*) FILTER (WHERE xid_last > 0) AS xid_samples",
        "max(xid_last) AS xid_last_max",
        *(f"{agg}({c}) AS {c}_{agg}" for c in _HEALTH_COUNTERS for agg in ("min", "max")),
        "max(temp_c) AS temp_c_max",
    ]
)
_HEALTH_ROLLED = ", ".join(
    [
        "max(last_ts) AS last_ts",
        "sum(xid_samples) AS xid_samples",
        "max(xid_last_max) AS xid_last_max",
        *(f"{agg}({c}_{agg}) AS {c}_{agg}" for c in _HEALTH_COUNTERS for agg in ("min", "max")),
        "max(temp_c_max) AS temp_c_max",
    ]
)
HEALTH_ROLLUPS = (("gpu_health_1h", 3_600_000), ("gpu_health_1m", 60_000))


def _health_tiles(con: duckdb.DuckDBPyConnection, window: Window) -> tuple[str, dict[str, Any]]:
    """The per-GPU partial statistics of every tile of the window, as one UNION query."""
    start_ms = round(window.start.timestamp() * 1000)
    end_ms = round(window.end.timestamp() * 1000)
    rollups = [(t, ms, tiles.newest_bucket_ms(con, t)) for t, ms in HEALTH_ROLLUPS]
    planned = tiles.plan(start_ms, end_ms, rollups, "gpu_samples") or [
        tiles.Tile("gpu_samples", 0, start_ms, end_ms)
    ]
    parts, params = [], {}
    for number, tile in enumerate(planned):
        column = "bucket_ts" if tile.bucket_ms else "ts"
        stats = _HEALTH_ROLLED if tile.bucket_ms else _HEALTH_RAW
        parts.append(
            f"SELECT coalesce(cluster, '') AS cluster, host, gpu_index, {stats} "
            f"FROM {tile.table} WHERE {column} >= to_timestamp($lo{number}) "
            f"AND {column} < to_timestamp($hi{number}) GROUP BY ALL"
        )
        params[f"lo{number}"] = tile.start_ms / 1000
        params[f"hi{number}"] = tile.end_ms / 1000
    return " UNION ALL BY NAME ".join(parts), params


def host_health(con: duckdb.DuckDBPyConnection, window: Window) -> pd.DataFrame:
    """Per host: GPUs, last sample, XID errors seen, ECC double-bit errors, PCIe replays and
    throttled time added in the window (counters: last minus first, per GPU), per R16/R17.

    Reads the health roll-ups for the whole minutes and hours they cover and raw samples for the
    rest (`dashboard.tiles`); the numbers are those of the raw samples alone.
    """
    parts, params = _health_tiles(con, window)
    return query(
        con,
        f"""
        WITH parts AS ({parts}),
        per_gpu AS (
            SELECT cluster, host, gpu_index,
                   max(epoch_ms(last_ts)) AS last_ms,
                   CAST(sum(xid_samples) AS BIGINT) AS xid_samples,
                   max(xid_last_max) AS xid_last_max,
                   max(ecc_dbe_total_max) - min(ecc_dbe_total_min) AS ecc_dbe_new,
                   max(ecc_dbe_total_max) AS ecc_dbe_total,
                   max(pcie_replay_total_max) - min(pcie_replay_total_min) AS pcie_replays_new,
                   (max(power_violation_us_max) - min(power_violation_us_min)) / 1e6
                       AS power_throttle_s,
                   (max(thermal_violation_us_max) - min(thermal_violation_us_min)) / 1e6
                       AS thermal_throttle_s,
                   max(temp_c_max) AS temp_c_max
            FROM parts
            GROUP BY ALL
        )
        SELECT cluster, host, count(*) AS gpus,
               to_timestamp(max(last_ms) / 1000.0) AS last_sample,
               sum(xid_samples) AS xid_samples,
               max(xid_last_max) AS xid_code,
               count(*) FILTER (WHERE xid_samples > 0) AS gpus_with_xid,
               coalesce(sum(ecc_dbe_new), 0) AS ecc_dbe_new,
               coalesce(max(ecc_dbe_total), 0) AS ecc_dbe_total,
               coalesce(sum(pcie_replays_new), 0) AS pcie_replays_new,
               coalesce(sum(power_throttle_s), 0) AS power_throttle_s,
               coalesce(sum(thermal_throttle_s), 0) AS thermal_throttle_s,
               max(temp_c_max) AS temp_c_max
        FROM per_gpu GROUP BY ALL ORDER BY cluster, host
        """,
        **params,
    )
