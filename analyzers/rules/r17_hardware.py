"""R17, hardware faults: XID errors, ECC double-bit errors, row-remap failures, PCIe replays.

Source: dcgm-exporter's default fields DCGM_FI_DEV_XID_ERRORS (the last XID), DCGM_FI_DEV_ECC_DBE_VOL
_TOTAL, DCGM_FI_DEV_ROW_REMAP_FAILURE and DCGM_FI_DEV_PCIE_REPLAY_COUNTER; XID meanings from NVIDIA's
XID catalog (48 DBE, 63/64 row remapping, 74 NVLink, 79 fell off the bus, 92 high SBE rate, 94/95
contained/uncontained ECC, 119/120 GSP). Flags the host and GPU whether or not a job holds it. A new
XID is a change of the last-XID value to a non-zero code; counters count only rises (resets are
skipped). PCIe replays are routine in small numbers: fleetscope flags 100 or more in a window.

Faults are grouped by the job that held the GPU when they happened (the last job seen on it, so a
fault on a GPU its job just left still names that job): two jobs crashing on one bad GPU in a
bucket are two findings, and a job scheduled on the GPU afterwards is not blamed.

Wasted GPU-hours: hours after the first fault in the window that the GPU stayed allocated at 0 %
utilization (the job hung or crashed on a GPU it still holds); 0 for an unallocated GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import partition_clause, ts_literal
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import fetch, make_finding

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window

CRITICAL_XIDS = frozenset({48, 63, 64, 74, 79, 92, 94, 95, 119, 120})


@dataclass(frozen=True)
class HardwareThresholds:
    min_pcie_replays: float = 100.0  # fleetscope: replays per window worth a look
    min_ecc_dbe: float = 1.0  # any double-bit error (DCGM: uncorrectable)
    lookback_s: float = 300.0  # previous sample, to tell a new XID from a standing one


@dataclass
class HardwareFaults:
    name: ClassVar[str] = "hardware"
    rule_ids: ClassVar[tuple[str, ...]] = ("R17",)
    rule_names: ClassVar[dict[str, str]] = {"R17": "Hardware faults"}  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "host"
    thresholds: HardwareThresholds = field(default_factory=HardwareThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        lo = window.start - timedelta(seconds=th.lookback_s)
        rows = fetch(
            conn,
            f"""
            WITH s AS (
                SELECT host,
                       CASE WHEN mig_instance_id IS NULL THEN CAST(gpu_index AS VARCHAR)
                            ELSE gpu_index || '/mig' || mig_instance_id END AS gpu,
                       job_id, epoch(ts) AS t, ts >= {ts_literal(window.start)} AS in_window,
                       COALESCE(gpu_util, 100 * gr_engine_active) AS util_pct,
                       xid_last, ecc_dbe_total, pcie_replay_total,
                       COALESCE(extra['DCGM_FI_DEV_ROW_REMAP_FAILURE'], 0) AS remap_failure
                FROM gpu_samples
                WHERE ts >= {ts_literal(lo)} AND ts < {ts_literal(window.end)}
                  AND {partition_clause(window, "host")}
            ), d AS (
                SELECT *, lead(t) OVER w - t AS dt_s,
                       last_value(job_id IGNORE NULLS) OVER (
                           PARTITION BY host, gpu ORDER BY t ROWS UNBOUNDED PRECEDING) AS owner,
                       CASE WHEN xid_last >= 1 AND xid_last = trunc(xid_last)
                                 AND xid_last IS DISTINCT FROM lag(xid_last) OVER w
                            THEN CAST(xid_last AS INTEGER) END AS new_xid,
                       greatest(ecc_dbe_total - lag(ecc_dbe_total) OVER w, 0) AS d_dbe,
                       greatest(pcie_replay_total - lag(pcie_replay_total) OVER w, 0) AS d_replay
                FROM s WINDOW w AS (PARTITION BY host, gpu ORDER BY t)
            ), f AS (
                SELECT *, new_xid IS NOT NULL OR d_dbe > 0 OR remap_failure > 0 AS fault
                FROM d WHERE in_window
            ), agg AS (
                SELECT host, gpu, owner AS job_id,
                       list(DISTINCT new_xid ORDER BY new_xid) FILTER (WHERE new_xid IS NOT NULL)
                           AS xids,
                       COALESCE(sum(d_dbe), 0) AS dbe, COALESCE(sum(d_replay), 0) AS replays,
                       max(remap_failure) AS remap_failure,
                       min(t) FILTER (WHERE fault) AS first_fault_t,
                       min(t) AS t0, max(t) AS t1
                FROM f GROUP BY host, gpu, owner
            )
            SELECT agg.*,
                   (SELECT COALESCE(sum(CASE WHEN dt_s <= 300 THEN dt_s ELSE 0 END), 0) / 3600.0
                       FROM f WHERE f.host = agg.host AND f.gpu = agg.gpu
                       AND f.job_id = agg.job_id AND f.util_pct = 0
                       AND f.t >= agg.first_fault_t) AS idle_after_h
            FROM agg
            WHERE xids IS NOT NULL OR dbe >= ? OR replays >= ? OR remap_failure > 0
            ORDER BY host, gpu, t0
            """,
            [th.min_ecc_dbe, th.min_pcie_replays],
        )
        findings = []
        for row in rows:
            xids = [int(x) for x in (row["xids"] or [])]
            faults = []
            if xids:
                faults.append("XID " + ", ".join(map(str, xids)))
            if row["dbe"] >= th.min_ecc_dbe:
                faults.append(f"{row['dbe']:.0f} ECC double-bit error(s)")
            if row["remap_failure"] > 0:
                faults.append("row-remap failure")
            if row["replays"] >= th.min_pcie_replays:
                faults.append(f"{row['replays']:.0f} PCIe replays")
            critical = (
                bool(CRITICAL_XIDS.intersection(xids))
                or row["dbe"] >= th.min_ecc_dbe
                or row["remap_failure"] > 0
            )
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R17",
                    severity=Severity.CRITICAL if critical else Severity.WARN,
                    job_id=row["job_id"],
                    host=row["host"],
                    gpus=[row["gpu"]],
                    start_t=row["first_fault_t"] or row["t0"],
                    end_t=row["t1"],
                    title=f"GPU {row['gpu']} on {row['host']}: {'; '.join(faults)}",
                    recommendation=(
                        "Drain the node and run DCGM diagnostics (dcgmi diag -r 3); replace or "
                        "reset the GPU before scheduling jobs on it again. Requeue the affected job."
                        if critical
                        else "Watch this GPU: application XIDs (13, 31, 43) usually mean a bug "
                        "or out-of-bounds access in the job; PCIe replays point at a riser or slot."
                    ),
                    wasted_gpu_hours=row["idle_after_h"] or 0.0,
                    estimate_method="allocated hours at 0 % utilization after the first fault",
                    evidence={
                        "xids": xids,
                        "ecc_dbe": row["dbe"],
                        "pcie_replays": row["replays"],
                        "row_remap_failure": bool(row["remap_failure"]),
                    },
                )
            )
        return findings
