"""Trace rules T1-T13 (shared/rules.md): analysis results in, `analyzers.findings.Finding`s out.

Each rule is an entry point of `fleetscope.trace_rules` named by its rule id, as another package's
is. It yields findings per rank with evidence, a fix and, where the what-if replay prices it, the
GPU-hours per week the fix would return. Thresholds are `TraceOptions` fields (with sources) or
stated here where rules.md gives none.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import numpy as np

from analyzers.findings import Finding, Severity
from analyzers.traces.analyses.base import AnalysisResult, TraceOptions
from analyzers.traces.frame import RankFrame, TraceSet
from analyzers.traces.hardware import Gpu, gpu_of
from fleetscope import plugins

Results = dict[str, AnalysisResult]
Emit = Callable[..., Finding]
Rule = Callable[[RankFrame, Results, TraceOptions, Emit], Iterator[Finding]]

# fleetscope defaults where rules.md names the signal but no number:
IDLE_SHARE_WARN = 0.20  # T1: a GPU idle a fifth of its busy span is worth a look
LAUNCH_OUTLIER_SHARE = 0.10  # T2: one launch in ten over HTA's cutoffs
SYNC_SHARE_WARN = 0.01  # T7: sync waits over 1 % of step time
OVERLAP_LOW = 0.50  # T9: less than half of communication hidden behind compute
# T13: a tenth of the SMs idle in kernel time. The signal: the TB plugin's "Blocks Per SM" tooltip
# (below 1, "the GPU multiprocessors are not fully utilized"), Nsight Compute's launch statistics.
SM_IDLE_SHARE_WARN = 0.10


def _values(results: Results, analysis: str, rank: int) -> Callable[[str], float]:
    """The rank's value of a key in one analysis's results (NaN when either is missing)."""
    return partial(results.get(analysis, AnalysisResult(analysis)).value, rank)


def _whatif(results: Results, rank: int, scenario: str) -> tuple[float, str]:
    whatif = _values(results, "whatif", rank)
    hours = whatif(f"{scenario}_gpu_hours_per_week")
    if math.isnan(hours):
        return 0.0, "not estimated (no ProfilerStep ranges or launches to replay)"
    saved = whatif(f"{scenario}_saved_fraction")
    return hours, (
        f"what-if replay ({scenario}): step time {saved:.1%} shorter; that fraction of the job's "
        "GPUs for a week (see the what-if table for the model's assumptions)"
    )


def t1_idle(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    temporal = _values(r, "temporal_breakdown", frame.rank)
    kernel, idle = temporal("kernel_time_us"), temporal("idle_us")
    if not kernel > 0 or idle / kernel < IDLE_SHARE_WARN:
        return
    idle_time = _values(r, "idle_time", frame.rank)
    causes = {k: idle_time(f"{k}_us") for k in ("host_wait", "kernel_wait", "other")}
    top = max(causes, key=lambda k: causes[k] if not math.isnan(causes[k]) else -1)
    fix = {
        "host_wait": "the CPU launches too slowly: use CUDA graphs or torch.compile, larger "
        "kernels (fusion, bigger batch), and move host work (data loading, logging) off the step",
        "kernel_wait": "many tiny kernels back to back: fuse them (torch.compile) or use CUDA graphs",
        "other": "kernels wait on events or communication: overlap communication with compute",
    }[top]
    yield emit(
        Severity.WARN,
        f"GPU idle {idle / kernel:.0%} of its busy span, mostly {top.replace('_', ' ')}",
        fix,
        {"idle_share": idle / kernel, "idle_us": idle, "per_stream_idle_us": causes},
    )


def t2_launch(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    launches = _values(r, "launch_stats", frame.rank)
    n = launches("launches")
    if not n > 0:
        return
    slow, late = launches("cpu_over_cutoff"), launches("delay_over_cutoff")
    short = launches("gpu_shorter_than_cpu")
    if max(slow, late) / n < LAUNCH_OUTLIER_SHARE and short / n < 0.5:
        return
    yield emit(
        Severity.INFO,
        f"launch overhead: {short / n:.0%} of kernels run shorter than their launch call",
        "batch small kernels (torch.compile, fused optimizers such as foreach/fused Adam) or "
        "capture the step in a CUDA graph",
        {
            "launches": n,
            f"cpu_gt_{o.runtime_cutoff_us:g}us": slow,
            f"delay_gt_{o.launch_delay_cutoff_us:g}us": late,
            "gpu_shorter_than_cpu": short,
        },
    )


def t3_queue(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    queue = _values(r, "queue_length", frame.rank)
    share = queue("blocked_share")
    if share > 0:
        yield emit(
            Severity.INFO,
            f"launch queue full ({o.max_queue_length}) {share:.1%} of the trace",
            "the GPU is the bottleneck here (good); the CPU blocks on a full queue, so host-side "
            "optimizations will not help: optimize the kernels",
            {"blocked_share": share, "max_queue_length": queue("max_queue_length")},
        )


def t4_gaps(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    gaps = _values(r, "gpu_gaps", frame.rank)("gaps")
    if gaps > 0:
        rows = [row for row in r["gpu_gaps"].table("gpu_gaps").rows if row[0] == frame.rank]
        first = [{"start_us": g[1], "gap_us": g[3], "cpu_busy_with": g[4]} for g in rows[:10]]
        yield emit(
            Severity.WARN,
            f"{int(gaps)} GPU gaps over {o.gpu_gap_threshold_us / 1e3:g} ms",
            "look at what the CPU does in the gaps (evidence) and overlap or remove it",
            {"gaps": first},
        )


def t5_low_util(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    low = _values(r, "low_util", frame.rank)("low_chunks")
    if low > 0:
        rows = [row for row in r["low_util"].table("low_util_chunks").rows if row[0] == frame.rank]
        yield emit(
            Severity.INFO,
            f"{int(low)} of {o.util_chunks} chunks under {o.util_threshold_pct:g} % GPU utilization",
            "see the idle-time and data-loader results for the cause of the quiet chunks",
            {"chunks": [{"chunk": c[1], "gpu_util_pct": c[4]} for c in rows]},
        )


def t6_pageable(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    memcpy = _values(r, "pageable_memcpy", frame.rank)
    evidence = {key: memcpy(key) for key in ("copies", "bytes", "gpu_us")}
    if evidence["copies"] > 0:
        yield emit(
            Severity.WARN,
            f"{int(evidence['copies'])} pageable memory copies",
            "pin host memory: DataLoader(pin_memory=True) and tensor.to(device, non_blocking=True)",
            {**evidence, "launch_cpu_us": memcpy("cpu_us")},
            *_whatif(r, frame.rank, "pinned_copies"),
        )


def t7_sync(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    sync = _values(r, "sync", frame.rank)
    share, calls = sync("share"), sync("sync_calls")
    if not (calls > 0 and share >= SYNC_SHARE_WARN):
        return
    rows = [row for row in r["sync"].table("sync_calls").rows if row[0] == frame.rank]
    yield emit(
        Severity.WARN,
        f"synchronization inside steps: {share:.1%} of step time",
        "remove .item()/.cpu()/print of GPU tensors from the step, avoid torch.cuda.synchronize(), "
        "use non_blocking copies",
        {"share": share, "calls": [{"name": x[1], "calls": x[4], "time_us": x[5]} for x in rows]},
        *_whatif(r, frame.rank, "no_sync"),
    )


def t8_dataloader(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    loader = _values(r, "dataloader", frame.rank)
    share = loader("share")
    if math.isnan(share) or share <= o.dataloader_share_warn:
        return
    rows = r["dataloader"].table("dataloader_share").rows
    steps = [{"step": s[1], "share": s[4]} for s in rows if s[0] == frame.rank]
    yield emit(
        Severity.CRITICAL if share >= o.dataloader_share_critical else Severity.WARN,
        f"data-loader bound: {share:.0%} of step time waiting for the next batch",
        "raise DataLoader(num_workers=...) (start at the CPU cores per GPU), set pin_memory=True "
        "and persistent_workers=True, prefetch; move decoding/augmentation off the main process",
        {"share": share, "dataloader_us": loader("dataloader_us"), "steps": steps},
        *_whatif(r, frame.rank, "no_dataloader_wait"),
    )


def t9_comm(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    comm = _values(r, "comm_comp_overlap", frame.rank)
    share, overlap = comm("communication_share_of_busy"), comm("overlap_ratio")
    if math.isnan(share) or share <= o.communication_share_warn or overlap >= OVERLAP_LOW:
        return
    yield emit(
        Severity.WARN,
        f"communication {share:.0%} of GPU busy time, {overlap:.0%} overlapped with compute",
        "overlap communication with compute (DDP bucket_cap_mb, FSDP prefetch), compress or "
        "reduce gradients less often (larger batch per GPU, gradient accumulation with no_sync)",
        {"communication_share": share, "overlap": overlap},
    )


def t10_tensor_cores(
    frame: RankFrame, r: Results, o: TraceOptions, emit: Emit
) -> Iterator[Finding]:
    cores = _values(r, "tensor_cores", frame.rank)
    evidence = {k: cores(k) for k in ("compute_capability", "eligible_us", "tensor_core_us")}
    cc, eligible, tc = evidence.values()
    gpu = gpu_of(frame.device_properties)
    if math.isnan(cc) or not gpu.tensor_cores or not eligible > 0 or tc > 0:
        return
    hours, method = _whatif(r, frame.rank, "amp")
    gpu_saved = _values(r, "whatif", frame.rank)("amp_gpu_busy_saved_fraction")
    if gpu_saved > 0.10 and hours < 0.01:
        method = (
            f"what-if replay (amp): GPU busy time {gpu_saved:.0%} shorter, but the step is bound "
            "by the CPU (data loader, launches), so the step and the GPU-hours shrink only once "
            "the CPU side is fixed (see dataloader_workers+amp and cuda_graphs)"
        )
    yield emit(
        Severity.WARN,
        "tensor cores unused by convolution/matmul kernels",
        _amp_fix(gpu),
        {**evidence, "amp_gpu_busy_saved_fraction": gpu_saved},
        hours,
        method,
    )


def _amp_fix(gpu: Gpu) -> str:
    """Mixed precision in the forms this GPU's tensor cores run (hardware.py)."""
    amp = "train with automatic mixed precision"
    if gpu.bf16:
        tf32 = " or enable TF32 (torch.backends.cuda.matmul.allow_tf32 = True) on Ampere and later"
        return f"{amp} (torch.autocast with bfloat16/float16)" + (tf32 if gpu.tf32 else "")
    return (
        f"{amp}: torch.autocast(dtype=torch.float16) with torch.cuda.amp.GradScaler "
        f"({gpu.describe()} has float16 tensor cores, not TF32 or bfloat16)"
    )


def t11_memory(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    mem = frame.mem_total_allocated
    allocated = mem[(frame.mem_device_type == 1) & ~np.isnan(mem)]
    total = gpu_of(frame.device_properties).memory_bytes
    if not len(allocated) or total is None:
        return
    peak = float(allocated.max())
    if peak / total > o.memory_near_capacity:
        yield emit(
            Severity.WARN,
            f"GPU memory at {peak / total:.0%} of capacity",
            "activation checkpointing, mixed precision, or a smaller micro-batch with gradient "
            "accumulation, before an out-of-memory error",
            {"peak_allocated_bytes": peak, "device_bytes": total},
        )


def t12_parallel(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    if any(n.startswith("DataParallel.forward") for n in frame.names):
        yield emit(
            Severity.WARN,
            "torch.nn.DataParallel in use",
            "use DistributedDataParallel (one process per GPU): DataParallel replicates the model "
            "every step and is limited by the GIL",
            {"evidence": "DataParallel.forward"},
        )
    info = frame.metadata.get("distributedInfo")
    backend = info.get("backend") if isinstance(info, dict) else None
    if backend == "gloo" and frame.on_stream.any():
        yield emit(
            Severity.WARN,
            "GPU training with the gloo backend",
            "use backend='nccl' for GPU tensors",
            {"backend": backend},
        )


def t13_small_grids(frame: RankFrame, r: Results, o: TraceOptions, emit: Emit) -> Iterator[Finding]:
    sm = _values(r, "sm_efficiency", frame.rank)
    kernel_us, idle_us = sm("kernel_us"), sm("idle_sm_us")
    if not kernel_us > 0 or idle_us / kernel_us < SM_IDLE_SHARE_WARN:
        return
    sms = gpu_of(frame.device_properties).sm_count  # None: nothing is said of SMs
    rows = r["sm_efficiency"].table("underfilled_kernels").rows
    kernels = [
        {"name": name, "calls": calls, "idle_sm_us": idle}
        | ({"blocks": f"{round(blocks, 1):g} on {sms} SMs"} if sms else {})
        for rank, name, calls, _, blocks, idle in rows
        if rank == frame.rank
    ]
    yield emit(
        Severity.INFO,
        f"kernels leave {idle_us / kernel_us:.0%} of the {f'{sms} SMs' if sms else 'GPU'} idle "
        "(grids smaller than the GPU)",
        "more work per kernel: a larger batch per GPU; fuse small kernels (torch.compile); batch "
        "small independent GEMMs into one (torch.bmm, concatenated weights); or run independent "
        "work on another stream. CUDA graphs do not help: they cut launch overhead, not idle SMs",
        {"idle_sm_share": idle_us / kernel_us, "kernel_us": kernel_us, "idle_sm_us": idle_us}
        | ({"sm_count": sms} if sms else {})
        | {"kernels": kernels},
    )


def trace_rules() -> dict[str, Rule]:
    """Every installed trace rule (built-in or not) by rule id, in order."""
    return dict(plugins.load_group(plugins.TRACE_RULES))


def _window(trace: TraceSet, frame: RankFrame) -> tuple[datetime, datetime]:
    """Wall-clock range of the trace: `baseTimeNanoseconds` + ts when present, else epoch
    microseconds when ts looks like one (2021 traces), else the Unix epoch (unknown)."""
    base_ns = frame.metadata.get("baseTimeNanoseconds")
    origin = trace.origin_us
    if isinstance(base_ns, int):
        start_s = base_ns / 1e9 + origin / 1e6
    else:
        start_s = origin / 1e6 if origin > 1e15 else 0.0
    span_us = float(frame.end.max()) if len(frame) else 0.0
    start = datetime.fromtimestamp(start_s, UTC)
    return start, start + timedelta(microseconds=max(span_us, 0.0))


def trace_findings(
    trace: TraceSet, results: Results, options: TraceOptions, *, job_id: str | None = None
) -> list[Finding]:
    """Every installed rule on every rank; findings ordered by rank, then rule id."""
    rules = trace_rules()
    out: list[Finding] = []
    for frame in trace.frames():
        for rule_id, rule in rules.items():
            out.extend(rule(frame, results, options, _emitter(trace, frame, job_id, rule_id)))
    return out


def _emitter(trace: TraceSet, frame: RankFrame, job_id: str | None, rule_id: str) -> Emit:
    """A rule's `emit` on a rank: its finding with the rank's window, host, scope and evidence."""
    start, end = _window(trace, frame)
    host = frame.metadata.get("host_name")

    def emit(
        severity: Severity,
        title: str,
        recommendation: str,
        evidence: dict[str, Any],
        wasted_gpu_hours: float = 0.0,
        method: str = "not estimated",
    ) -> Finding:
        return Finding(
            rule_id=rule_id,
            severity=severity,
            job_id=job_id,
            host=host if isinstance(host, str) else None,
            gpus=(),
            window_start=start,
            window_end=end,
            title=f"rank {frame.rank}: {title}",
            recommendation=recommendation,
            wasted_gpu_hours=max(0.0, float(wasted_gpu_hours)),
            estimate_method=method,
            evidence={"rank": frame.rank, "trace": frame.path.name, **evidence},
            scope=f"trace:{frame.path.name}:rank{frame.rank}",
        )

    return emit
