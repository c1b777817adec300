"""P4, low MFU: a job whose measured model FLOPs utilization is far below its team's median on
the same GPU model and dtype.

Signal: measured MFU (analyzers.mfu.measured: the SDK's FLOPs per step x steps per second over
the GPUs' dense datasheet peak), never DCGM's tensor-pipe proxy. The reference is the fleet's own
distribution, not an absolute figure: what a model reaches depends on its architecture and
parallelism (PaLM 540B reached 46.2 % on TPU v4, Chowdhery et al. 2022 table 3; Llama 3 405B
38-43 % in BF16 on H100, Dubey et al. 2024 table 4), so a team's jobs on one GPU model and dtype
are their own yardstick. A job fires when its MFU is below `max_share_of_median` (0.5) of the
median of its group (team, GPU model, dtype) and the group holds at least `min_jobs` (3) jobs
with a measured MFU: at half its peers' MFU a job spends twice the GPU-hours on the same model
FLOPs, well beyond the run-to-run spread of one model's MFU (a few points).

Recoverable GPU-hours, priced at the team median: training GPU-hours x (1 - MFU / median), the
hours the same model FLOPs would have taken at the group's median MFU.

Partial rows (fleet mode): one per job with FLOPs (analyzers.mfu.measured.ROW_KEYS); `combine`
groups them by team from the catalog.

Simulated (`simulation`, simulator.rule_scenarios): training jobs whose script reports FLOPs at
40 % MFU (Llama 3's 38-43 %), the peers, and ones at 8 % (unfused ops, fp32 attention, tiny
matmuls: busy GPUs, little model work); the truth applies this rule's test to their designed
MFU, per team and GPU model, over the jobs of the truth's range.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Final, Protocol

from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.mfu.measured import job_rows, mfu_of
from analyzers.rules._common import make_finding, r
from analyzers.run.window import Window

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog

PEER_MFU = 0.40  # simulated: Llama 3 405B's 38-43 % BF16 MFU (Dubey et al. 2024, table 4)
LOW_MFU = 0.08  # simulated: a fifth of its peers, far below half the median


@dataclass(frozen=True)
class LowMfuThresholds:
    max_share_of_median: float = 0.5  # fleetscope: half the peers' MFU, twice their GPU-hours
    min_jobs: int = 3  # fleetscope: fewer jobs make no median to compare with
    min_steps: int = 20  # P1's: fewer reported steps say nothing


class _DesignedJob(Protocol):
    """A simulated job as simulator.rule_scenarios.SimulatedJob gives it to a fleet truth."""

    job_id: str
    team: str
    gpu_model: str
    mig: bool
    mfu: float | None
    training_gpu_hours: float


def _truth(jobs: Sequence[_DesignedJob]) -> dict[str, float]:
    """P4 on the designed MFU: per (team, GPU model), jobs whose script reports FLOPs on whole
    GPUs (a MIG slice has no peak in the table), at least 3 of them, below half their median;
    waste: training GPU-hours x (1 - MFU / median)."""
    th = LowMfuThresholds()
    groups: dict[tuple[str, str], list[_DesignedJob]] = defaultdict(list)
    for job in jobs:
        if job.mfu and not job.mig:
            groups[(job.team, job.gpu_model)].append(job)
    fired: dict[str, float] = {}
    for members in groups.values():
        if len(members) < th.min_jobs:
            continue
        median = statistics.median(float(j.mfu or 0.0) for j in members)
        for job in members:
            mfu = float(job.mfu or 0.0)
            if mfu < th.max_share_of_median * median:
                fired[job.job_id] = job.training_gpu_hours * (1.0 - mfu / median)
    return fired


# What the simulator judges this rule by (simulator.rule_scenarios reads it as data): training
# jobs whose scripts report FLOPs, the peers at 40 % and the low ones at 8 %, and the truth.
SIMULATION: Final[dict[str, Any]] = {
    "scenarios": (
        {
            "name": "flops_reported",
            "description": "Healthy training whose script reports its FLOPs per step: 40 % MFU.",
            "main": "busy",
            "weight": 20.0,
            "steps": {"mfu": PEER_MFU},
        },
        {
            "name": "low_mfu",
            "description": "Busy GPUs, little model work: unfused ops and fp32 attention, 8 % "
            "MFU where its team's jobs reach 40 %.",
            "main": "busy",
            "weight": 5.0,
            "intended": ("P4",),
            "steps": {"mfu": LOW_MFU},
        },
    ),
    "fleet_rules": (
        {
            "rule_id": "P4",
            "verdicts": _truth,
            "how": "measured MFU < 0.5 x the median of the team's jobs on the same GPU model "
            "and dtype, >= 3 jobs (fleetscope, from the fleet's own distribution); waste: "
            "training GPU-h x (1 - MFU / median)",
        },
    ),
}


@dataclass
class LowMfu:
    name: ClassVar[str] = "low_mfu"
    rule_ids: ClassVar[tuple[str, ...]] = ("P4",)
    rule_names: ClassVar[dict[str, str]] = {"P4": "Low MFU"}  # analyzers.rule_cards
    # an idle or input-starved job also has a low MFU: the idle or input finding is the one to act on
    explained_by: ClassVar[dict[str, tuple[str, ...]]] = {
        "P4": ("R17", "R1", "R3", "R10", "R9", "P1", "P3")
    }
    inputs: ClassVar[tuple[str, ...]] = ("step_samples", "gpu_samples")
    partition_by: ClassVar[PartitionKey] = "none"
    thresholds: LowMfuThresholds = field(default_factory=LowMfuThresholds)
    simulation: ClassVar[dict[str, Any]] = SIMULATION  # simulator.rule_scenarios

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        return self.combine(self.partial(conn, window), window, catalog)

    def partial(self, conn: duckdb.DuckDBPyConnection, window: Window) -> list[dict[str, Any]]:
        """The window's jobs with FLOPs (a part of the fleet's, in fleet mode)."""
        return job_rows(conn, Window(window.start, window.end))

    def combine(
        self, rows: Sequence[Mapping[str, Any]], window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        groups: dict[tuple[str, str, str], list[tuple[float, Mapping[str, Any]]]] = defaultdict(
            list
        )
        for row in rows:
            if int(row["steps"] or 0) < th.min_steps:
                continue
            found = mfu_of(row)
            job = catalog.get(str(row["job_id"]))
            if found is None or job is None or not job.team:
                continue
            groups[(job.team, str(row["gpu_model"]), str(row["dtype"]))].append((found.value, row))
        findings = []
        for (team, model, dtype), members in sorted(groups.items()):
            if len(members) < th.min_jobs:
                continue
            median = statistics.median(value for value, _ in members)
            for value, row in members:
                if median <= 0 or value >= th.max_share_of_median * median:
                    continue
                hours = float(row["training_gpu_hours"] or 0.0)
                findings.append(
                    make_finding(
                        catalog,
                        window,
                        rule_id="P4",
                        severity=Severity.WARN,
                        job_id=str(row["job_id"]),
                        host=None,
                        gpus=(),
                        start_t=float(row["t0"]),
                        end_t=float(row["t1"]),
                        title=(
                            f"MFU {value:.1%}, {value / median:.0%} of team {team}'s median "
                            f"{median:.1%} on {model} ({dtype})"
                        ),
                        recommendation=(
                            "Profile a step (fleetscope profile) and compare with the team's "
                            "faster jobs: fused attention (scaled_dot_product_attention), "
                            "torch.compile, bf16 autocast, a larger micro-batch, and fewer "
                            "host syncs in the step raise the model FLOPs per second."
                        ),
                        wasted_gpu_hours=hours * (1.0 - value / median),
                        estimate_method=(
                            "training GPU-hours x (1 - MFU / the team's median MFU on the same "
                            "GPU model and dtype): the hours at the team median"
                        ),
                        evidence={
                            "mfu_share": r(value),
                            "team_median_mfu_share": r(median),
                            "threshold_of_median_ratio": th.max_share_of_median,
                            "team_jobs": len(members),
                            "gpu_model": model,
                            "dtype": dtype,
                            "flops_per_step": float(row["flops_per_step"]),
                            "steps_per_s": r(float(row["steps_per_s"])),
                            "ranks": int(row["ranks"]),
                            "training_gpu_hours": r(hours),
                        },
                        table="step_samples",
                    )
                )
        return findings
