"""R15, multi-node fragmentation: a job spread over more nodes than its GPUs need.

Sources: jobstats and job_defense_shield (Princeton Research Computing) flag multi-node jobs with
fewer GPUs per node than a node holds (8 here: setting `analyzers.gpus_per_node` is the fleet's
node size; the threshold below overrides it per analyzer). Nodes are counted per minute, so a job
that *moves* from one host to another (a restart elsewhere) is not fragmented: only hosts used in
the same minute count.

Wasted GPU-hours: 0. Fragmentation costs inter-node communication time, which samples cannot
separate from compute; the evidence gives the node counts and the scheduler fix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from analyzers.accounting.frames import prepare
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import fetch, make_finding

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window


@dataclass(frozen=True)
class FragmentationThresholds:
    gpus_per_node: int = 8  # jobstats / job_defense_shield: full nodes of 8 GPUs
    min_minutes: int = 10  # fleetscope: the spread must last 10 minutes, not one scheduling blip


@dataclass
class Fragmentation:
    name: ClassVar[str] = "fragmentation"
    rule_ids: ClassVar[tuple[str, ...]] = ("R15",)
    rule_names: ClassVar[dict[str, str]] = {
        "R15": "Multi-node fragmentation"
    }  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: FragmentationThresholds = field(default_factory=FragmentationThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        frame = prepare(conn, window)
        rows = fetch(
            conn,
            f"""
            WITH m AS (
                SELECT job_id, floor(t / 60) AS minute,
                       count(DISTINCT host) AS hosts, count(DISTINCT host || ':' || gpu) AS gpus,
                       list(DISTINCT host ORDER BY host) AS host_list
                FROM {frame.gpu} WHERE in_window GROUP BY job_id, minute
            )
            SELECT job_id, hosts, gpus, any_value(host_list) AS host_list,
                   count(*) AS minutes, min(minute) * 60 AS t0, (max(minute) + 1) * 60 AS t1
            FROM m WHERE hosts > ceil(gpus / ?) AND hosts > 1
            GROUP BY job_id, hosts, gpus HAVING count(*) >= ?
            ORDER BY job_id, minutes DESC
            """,
            [float(th.gpus_per_node), th.min_minutes],
        )
        findings = []
        seen: set[str] = set()
        for row in rows:
            if row["job_id"] in seen:
                continue  # the layout the job spent most minutes in
            seen.add(row["job_id"])
            needed = math.ceil(row["gpus"] / th.gpus_per_node)
            findings.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R15",
                    severity=Severity.INFO,
                    job_id=row["job_id"],
                    host=None,
                    gpus=(),
                    start_t=row["t0"],
                    end_t=row["t1"],
                    title=f"{row['gpus']} GPUs spread over {row['hosts']} nodes ({needed} would do)",
                    recommendation=(
                        f"Ask the scheduler for whole nodes: --nodes={needed} "
                        f"--gpus-per-node={min(row['gpus'], th.gpus_per_node)} (Slurm) or a "
                        "topology-aware placement, so collectives stay on NVLink."
                    ),
                    wasted_gpu_hours=0.0,
                    estimate_method="not estimated: the cost is communication time samples cannot isolate",
                    evidence={
                        "hosts": list(row["host_list"]),
                        "gpus": int(row["gpus"]),
                        "nodes_needed": needed,
                        "minutes_spread": int(row["minutes"]),
                    },
                )
            )
        return findings
