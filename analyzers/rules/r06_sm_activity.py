"""R6 low SM activity, R7 no tensor cores, R8 memory-bound: the DCGM profiling-field family.

Sources: DCGM documentation (NVIDIA): SM_ACTIVE below 0.5 "likely indicates ineffective GPU usage",
0.8 or more is needed but not sufficient; DRAM_ACTIVE above 0.8 is the practical peak of memory
bandwidth (also ClusterCockpit's memory-bound job class); the PyTorch profiler TensorBoard plugin
(recommendation T2) and DCGM's PIPE_TENSOR_ACTIVE: on compute capability 7.0 or newer, a busy GPU
with no tensor-pipe activity should try AMP / bf16.

Only jobs that worked (mean utilization at least 0.5 %) are judged: an idle GPU is R1-R3's
business. A job is judged on a field only when at least half its samples carry it: dcgm-exporter's
default CSV disables SM_ACTIVE and the pipes, and these rules then stay silent (the job summary
says how to enable them). R8 (memory-bound) is the more specific diagnosis of a low-SM job; both
are reported, and the ranking counts the job's hours once.

Wasted GPU-hours (the shared accounting of analyzers/accounting/sql.py):
- R6, R8: allocated GPU-hours x (0.8 - SM_ACTIVE) / 0.8: the gap to DCGM's 0.8 "good" line.
- R7: allocated GPU-hours x 0.5: mixed precision on tensor cores at least doubles throughput.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from analyzers.accounting.frames import prepare
from analyzers.base import PartitionKey
from analyzers.findings import Finding, Severity
from analyzers.rules._common import JobRow, job_rows, make_finding, r

if TYPE_CHECKING:
    import duckdb

    from analyzers.base import JobCatalog
    from analyzers.run.window import Window

# Compute capability by product name (NVIDIA CUDA GPUs list); first match wins, longest names first.
COMPUTE_CAPABILITY: tuple[tuple[str, float], ...] = (
    ("GH200", 9.0),
    ("H200", 9.0),
    ("H100", 9.0),
    ("H800", 9.0),
    ("B200", 10.0),
    ("B100", 10.0),
    ("A100", 8.0),
    ("A800", 8.0),
    ("A30", 8.0),
    ("A40", 8.6),
    ("A10", 8.6),
    ("L40", 8.9),
    ("L4", 8.9),
    ("RTX 6000 Ada", 8.9),
    ("A6000", 8.6),
    ("V100", 7.0),
    ("T4", 7.5),
    ("P100", 6.0),
    ("P40", 6.1),
    ("K80", 3.7),
)


def compute_capability(model: str | None) -> float | None:
    if not model:
        return None
    for name, cc in COMPUTE_CAPABILITY:
        if name.lower() in model.lower():
            return cc
    return None


@dataclass(frozen=True)
class SmActivityThresholds:
    low_sm_active: float = 0.5  # DCGM docs: < 0.5 likely ineffective
    high_dram_active: float = 0.8  # DCGM docs / ClusterCockpit: practical peak bandwidth
    tensor_idle: float = 0.02  # "PIPE_TENSOR_ACTIVE ~ 0": below 2 % of cycles
    min_compute_capability: float = 7.0  # tensor cores from Volta (7.0) on
    good_sm_active: float = 0.8  # DCGM docs: >= 0.8 needed; the waste estimate's target
    worked_util_pct: float = 0.5  # below this mean the job did no work: R1/R3's business
    min_field_coverage: float = 0.5  # a field must be in half the judged samples
    amp_speedup: float = 2.0  # mixed precision at least doubles math throughput (R7's estimate)
    min_runtime_s: float = 300.0  # jobstats' 300 s floor, on judged time


@dataclass
class SmActivity:
    name: ClassVar[str] = "sm_activity"
    rule_ids: ClassVar[tuple[str, ...]] = ("R6", "R7", "R8")
    rule_names: ClassVar[dict[str, str]] = {
        "R6": "Low SM activity",
        "R7": "Tensor cores unused",
        "R8": "Memory-bound",
    }  # analyzers.rule_cards
    inputs: ClassVar[tuple[str, ...]] = ("gpu_samples",)
    partition_by: ClassVar[PartitionKey] = "job"
    thresholds: SmActivityThresholds = field(default_factory=SmActivityThresholds)

    def run(
        self, conn: duckdb.DuckDBPyConnection, window: Window, catalog: JobCatalog
    ) -> list[Finding]:
        th = self.thresholds
        findings = []
        for job in job_rows(conn, prepare(conn, window)):
            if job.util_mean is None or job.util_mean < th.worked_util_pct:
                continue
            if job.warm_h * 3600 <= th.min_runtime_s or not job.n_warm:
                continue
            findings.extend(self._judge(job, window, catalog))
        return findings

    def _covered(self, n: int, job: JobRow) -> bool:
        return n >= self.thresholds.min_field_coverage * job.n_warm

    def _judge(self, job: JobRow, window: Window, catalog: JobCatalog) -> list[Finding]:
        th = self.thresholds
        out = []
        common: dict[str, Any] = {
            "job_id": job.job_id,
            "host": job.host,
            "gpus": job.gpu_labels,
            "start_t": job.first_t,
            "end_t": job.last_t,
        }
        sm = job.sm_mean if self._covered(job.n_sm, job) else None
        dram = job.dram_mean if self._covered(job.n_dram, job) else None
        tensor = job.tensor_mean if self._covered(job.n_tensor, job) else None
        if sm is not None and sm < th.low_sm_active:
            wasted = job.alloc_h * max(0.0, th.good_sm_active - sm) / th.good_sm_active
            method = (
                f"allocated GPU-hours x ({th.good_sm_active} - SM_ACTIVE) / {th.good_sm_active}"
            )
            if dram is not None and dram > th.high_dram_active:
                out.append(
                    make_finding(
                        catalog,
                        window,
                        rule_id="R8",
                        severity=Severity.WARN,
                        title=f"memory-bound: DRAM_ACTIVE {dram:.2f} with SM_ACTIVE {sm:.2f}",
                        recommendation=(
                            "The kernels wait on memory bandwidth. Fuse element-wise ops "
                            "(torch.compile), use bf16/fp16 to halve the bytes moved, and prefer "
                            "channels-last layouts; check the top kernels with a trace."
                        ),
                        wasted_gpu_hours=wasted,
                        estimate_method=method,
                        evidence={
                            "dram_active_mean": r(dram),
                            "sm_active_mean": r(sm),
                            "dram_threshold": th.high_dram_active,
                        },
                        **common,
                    )
                )
            out.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R6",
                    severity=Severity.WARN,
                    title=f"SM_ACTIVE {sm:.2f} while the GPU reports {job.util_mean:.0f} % busy",
                    recommendation=(
                        "The GPU is 'busy' but most SMs are idle: kernels are too small or too "
                        "few. Increase the batch size, fuse kernels (torch.compile, CUDA "
                        "graphs), and look for serial work in a trace."
                    ),
                    wasted_gpu_hours=wasted,
                    estimate_method=method,
                    evidence={
                        "sm_active_mean": r(sm),
                        "util_mean_pct": r(job.util_mean, 2),
                        "threshold": th.low_sm_active,
                    },
                    **common,
                )
            )
        cc = compute_capability(job.gpu_model)
        if (
            tensor is not None
            and sm is not None
            and sm >= th.low_sm_active
            and tensor < th.tensor_idle
            and cc is not None
            and cc >= th.min_compute_capability
        ):
            out.append(
                make_finding(
                    catalog,
                    window,
                    rule_id="R7",
                    severity=Severity.WARN,
                    title=f"tensor cores idle (PIPE_TENSOR_ACTIVE {tensor:.3f}) on a busy {job.gpu_model}",
                    recommendation=(
                        "The math runs on the FP32 pipes. Enable mixed precision (torch.autocast "
                        "with bf16, or fp16 with GradScaler) or TF32 "
                        "(torch.backends.cuda.matmul.allow_tf32 = True)."
                    ),
                    wasted_gpu_hours=job.alloc_h * (1 - 1 / th.amp_speedup),
                    estimate_method=(
                        f"allocated GPU-hours x (1 - 1/{th.amp_speedup}): mixed precision's "
                        "speed-up on tensor cores"
                    ),
                    evidence={
                        "tensor_active_mean": r(tensor),
                        "sm_active_mean": r(sm),
                        "compute_capability": cc,
                    },
                    **common,
                )
            )
        return out
