"""The panels a Grafana + DCGM user looks at first, per GPU and host, and a job's host footprint.

NVIDIA's dcgm-exporter Grafana dashboard (grafana.com dashboard 12239) shows, per GPU: temperature,
power, SM clocks, memory clocks, utilization, framebuffer used, and the DCGM profiling fields
(PCIe and NVLink bytes). `gpu_panels` computes exactly those series from `gpu_samples` (columns
named by fleetscope.contract), bucketed like every other chart, one line per `host / GPU n`.
Memory is shown as a share of capacity (DCGM_FI_DEV_FB_USED / (FB_USED + FB_FREE)), power against
the board's power limit. dcgm-exporter's default counters publish no power limit, so the limit
comes from NVIDIA's datasheets by model name (`POWER_LIMIT_W`), and the chart says when it does not
know the model. Read-only queries; no Streamlit here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from analyzers.accounting.usage import query, rollup_stages
from analyzers.run.window import HOUR_S, Window
from warehouse.read.rollup_merge import stored_sums

if TYPE_CHECKING:
    import duckdb

# Board power limits (TDP / max TGP) from NVIDIA's product datasheets, by DCGM's modelName.
POWER_LIMIT_W: dict[str, float] = {
    "NVIDIA H100 80GB HBM3": 700.0,  # H100 SXM5
    "NVIDIA H100 PCIe": 350.0,
    "NVIDIA H200": 700.0,
    "NVIDIA A100-SXM4-80GB": 400.0,
    "NVIDIA A100-SXM4-40GB": 400.0,
    "NVIDIA A100 80GB PCIe": 300.0,
    "NVIDIA A100-PCIE-40GB": 250.0,
    "NVIDIA L40S": 350.0,
    "NVIDIA L4": 72.0,
}


@dataclass(frozen=True)
class Panel:
    column: str
    title: str


PANELS: tuple[Panel, ...] = (
    Panel("temp_c", "temperature (°C)"),
    Panel("power_w", "power (W) against the board limit"),
    Panel("sm_clock_mhz", "SM clock (MHz)"),
    Panel("mem_clock_mhz", "memory clock (MHz)"),
    Panel("fb_used_pct", "memory used (% of capacity)"),
    Panel("util_pct", "GPU utilization (%)"),
    Panel("pcie_gb_s", "PCIe throughput, tx + rx (GB/s)"),
    Panel("nvlink_gb_s", "NVLink throughput, tx + rx (GB/s)"),
)


# Panels the usage roll-ups keep (`warehouse.read.rollups`: per bucket, host, GPU index and job, each
# column's sum and count), as (panel, roll-up column, scale). The memory clock is not kept, and the
# memory share is of the capacity read from the window's last hour of raw samples.
ROLLED_PANELS: tuple[tuple[str, str, float], ...] = (
    ("temp_c", "temp_c", 1.0),
    ("power_w", "power_w", 1.0),
    ("sm_clock_mhz", "sm_clock_mhz", 1.0),
    ("util_pct", "gpu_util", 1.0),
    ("pcie_gb_s", "pcie_tx_bytes_s", 1e-9),
    ("pcie_gb_s", "pcie_rx_bytes_s", 1e-9),
    ("nvlink_gb_s", "nvlink_tx_bytes_s", 1e-9),
    ("nvlink_gb_s", "nvlink_rx_bytes_s", 1e-9),
)
NOT_ROLLED_UP: frozenset[str] = frozenset({"mem_clock_mhz"})
CAPACITY_LOOKBACK_S = 3600.0  # raw samples read for each GPU's model and memory capacity


def reads_rollups(window: Window) -> bool:
    """Whether `gpu_panels` reads the usage roll-ups for the window: buckets of an hour or more
    (a week: 60 M raw samples, 5-7 s to read one host's from them; bench/RESULTS.md, "Dashboard
    on the 1,000-GPU week, wave 9"). Shorter windows read raw samples: every panel, MIG
    instances apart."""
    return window.bucket_s >= HOUR_S


def gpu_panels(
    con: duckdb.DuckDBPyConnection, window: Window, hosts: list[str], job_id: str | None = None
) -> pd.DataFrame:
    """Per (bucket, host, GPU): the DCGM panels' means, and the GPU's power limit."""
    if not hosts:
        return pd.DataFrame(columns=["bucket", "gpu", *(p.column for p in PANELS)])
    stages = rollup_stages(con, window) if reads_rollups(window) else []
    if stages:
        frame = _rolled_panels(con, window, hosts, job_id, stages)
    else:
        frame = query(con, _RAW_PANELS, **_params(window, hosts, job_id, window.start.timestamp()))
    frame["bucket"] = pd.to_datetime(frame["bucket_ms"], unit="ms", utc=True)
    frame["power_limit_w"] = frame["gpu_model"].map(POWER_LIMIT_W)
    return frame.drop(columns=["bucket_ms"])


_RAW_PANELS = """
    SELECT epoch_ms(ts) // $bucket_ms * $bucket_ms AS bucket_ms,
           host || ' / GPU ' || gpu_index::VARCHAR
             || coalesce('/mig' || mig_instance_id::VARCHAR, '') AS gpu,
           any_value(gpu_model) AS gpu_model,
           avg(temp_c) AS temp_c, avg(power_w) AS power_w,
           avg(sm_clock_mhz) AS sm_clock_mhz, avg(mem_clock_mhz) AS mem_clock_mhz,
           100 * avg(fb_used_mib / nullif(fb_used_mib + fb_free_mib, 0)) AS fb_used_pct,
           avg(gpu_util) AS util_pct,
           avg(pcie_tx_bytes_s + pcie_rx_bytes_s) / 1e9 AS pcie_gb_s,
           avg(nvlink_tx_bytes_s + nvlink_rx_bytes_s) / 1e9 AS nvlink_gb_s
    FROM gpu_samples
    WHERE ts >= to_timestamp($lo) AND ts < to_timestamp($hi)
      AND list_contains($hosts, host) AND ($job IS NULL OR job_id = $job)
    GROUP BY ALL ORDER BY 1, 2
"""


def _params(window: Window, hosts: list[str], job_id: str | None, lo: float) -> dict[str, object]:
    return {
        "bucket_ms": window.bucket_s * 1000,
        "lo": lo,
        "hi": window.end.timestamp(),
        "hosts": hosts,
        "job": job_id,
    }


def _rolled_panels(
    con: duckdb.DuckDBPyConnection,
    window: Window,
    hosts: list[str],
    job_id: str | None,
    stages: list[tuple[str, int, float, float]],
) -> pd.DataFrame:
    """The panels from the usage roll-ups up to their cut-off and raw samples after it: each
    bucket's mean is its samples' sum over their count, as the raw mean (PCIe and NVLink as the
    means of transmit and receive added); MIG instances of a GPU are one line (the roll-ups key
    by GPU index); memory used is the mean over the GPU's capacity."""
    columns = sorted({column for _, column, _ in ROLLED_PANELS} | {"fb_used_mib"})
    raw_sums = ", ".join(f"sum({c}) AS {c}_sum, count({c}) AS {c}_n" for c in columns)
    parts = [
        f"SELECT epoch_ms(bucket_ts) AS ms, host, gpu_index, job_id, {stored_sums(columns)} "
        f"FROM {table} WHERE bucket_ts >= to_timestamp({lo}) AND bucket_ts < to_timestamp({hi})"
        for table, _, lo, hi in stages
    ]
    parts.append(
        f"SELECT epoch_ms(ts) AS ms, host, gpu_index, job_id, {raw_sums} FROM gpu_samples "
        "WHERE ts >= to_timestamp($lo) AND ts < to_timestamp($hi) GROUP BY ALL"
    )
    means = ", ".join(f"sum({c}_sum) / nullif(sum({c}_n), 0) AS {c}" for c in columns)
    per_panel: dict[str, list[str]] = {}
    for panel, column, scale in ROLLED_PANELS:
        per_panel.setdefault(panel, []).append(f"{column} * {scale}" if scale != 1 else column)
    panels = ", ".join(f"{' + '.join(terms)} AS {panel}" for panel, terms in per_panel.items())
    sql = f"""
        WITH rows AS ({" UNION ALL BY NAME ".join(parts)}),
        b AS (
            SELECT ms // $bucket_ms * $bucket_ms AS bucket_ms, host, gpu_index, {means}
            FROM rows WHERE list_contains($hosts, host) AND ($job IS NULL OR job_id = $job)
            GROUP BY ALL
        ), hw AS (
            SELECT host, gpu_index, any_value(gpu_model) AS gpu_model,
                   max(fb_used_mib + fb_free_mib) AS fb_total_mib
            FROM gpu_samples
            WHERE ts >= to_timestamp($hi - {CAPACITY_LOOKBACK_S}) AND ts < to_timestamp($hi)
              AND list_contains($hosts, host) AND mig_instance_id IS NULL
            GROUP BY ALL
        )
        SELECT bucket_ms, host || ' / GPU ' || gpu_index::VARCHAR AS gpu, gpu_model,
               NULL::DOUBLE AS mem_clock_mhz,
               100 * fb_used_mib / nullif(fb_total_mib, 0) AS fb_used_pct, {panels}
        FROM b LEFT JOIN hw USING (host, gpu_index)
        ORDER BY 1, 2
    """
    frame = query(con, sql, **_params(window, hosts, job_id, stages[-1][3]))
    return frame[["bucket_ms", "gpu", "gpu_model", *(p.column for p in PANELS)]]


def hosts_in(con: duckdb.DuckDBPyConnection, window: Window) -> list[str]:
    """The hosts with GPU samples in the window: from the usage roll-ups up to their cut-off and
    raw samples after it where `gpu_panels` reads them (a roll-up row exists for every host,
    GPU and bucket that had a sample), else from raw samples."""
    stages = rollup_stages(con, window) if reads_rollups(window) else []
    parts = [
        f"SELECT host FROM {table} "
        f"WHERE bucket_ts >= to_timestamp({lo}) AND bucket_ts < to_timestamp({hi})"
        for table, _, lo, hi in stages
    ]
    lo = stages[-1][3] if stages else window.start.timestamp()
    parts.append(
        "SELECT host FROM gpu_samples WHERE ts >= to_timestamp($lo) AND ts < to_timestamp($hi)"
    )
    rows = con.sql(
        f"SELECT DISTINCT host FROM ({' UNION ALL '.join(parts)}) ORDER BY host",
        params={"lo": lo, "hi": window.end.timestamp()},
    ).fetchall()
    return [str(h) for (h,) in rows]


@dataclass(frozen=True)
class Footprint:
    """A job's CPU and host memory use (ClusterCockpit's job footprint), and where it came from."""

    source: str  # "the job's cgroup" or "whole hosts"
    cpu_mean_pct: float | None
    cpu_max_pct: float | None
    mem_max_gib: float | None
    mem_total_gib: float | None


def job_footprint(
    con: duckdb.DuckDBPyConnection, job_id: str, window: Window, hosts: list[str]
) -> Footprint | None:
    """From the job's own host rows (its cgroup, when the agent reads cgroups), else the whole
    hosts it ran on; None when the warehouse holds neither."""
    sql = """
        SELECT avg(cpu_user_pct + cpu_system_pct), max(cpu_user_pct + cpu_system_pct),
               max(mem_used_bytes) / 2^30, max(mem_total_bytes) / 2^30, count(*)
        FROM host_samples
        WHERE ts >= to_timestamp($lo) AND ts < to_timestamp($hi) AND {where}
    """
    params = {"lo": window.start.timestamp(), "hi": window.end.timestamp()}
    for source, where, extra in (
        ("the job's cgroup", "job_id = $job", {"job": job_id}),
        ("whole hosts", "job_id IS NULL AND list_contains($hosts, host)", {"hosts": hosts}),
    ):
        row = con.sql(sql.format(where=where), params={**params, **extra}).fetchall()[0]
        if row[4]:
            return Footprint(source, row[0], row[1], row[2], row[3])
    return None
