"""Kernel launch statistics (rule T2): CPU launch cost, GPU duration and launch delay per launch.

Algorithm (HTA 0.5.0 `get_cuda_kernel_launch_stats`, trace-semantics.md section 7): CPU rows
(`stream == -1`) and GPU rows with the correlation of a row named one of `HTA_LAUNCHES` are
inner-joined on it; per pair: `cpu_duration`, `gpu_duration`, `launch_delay = max(0, gpu.start -
cpu.end)`. Outliers (HTA's plot cutoffs): `cpu_duration > 50 us`, `launch_delay > 100 us`, and GPU
shorter than CPU. HTA skips driver (Triton, CUDA graphs) and HIP launches: nothing on AMD.
"""

from __future__ import annotations

import numpy as np

from analyzers.traces.analyses.base import AnalysisResult, Table, TraceOptions, analysis
from analyzers.traces.frame import Mode, TraceSet
from analyzers.traces.stats import describe, join_rows

PLUGIN_ORDER = 50  # its place in the trace report (fleetscope.plugins)
HTA_LAUNCHES = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "runFunction - job_prep_and_submit_for_execution",
        "cudaMemcpyAsync",
        "cudaMemsetAsync",
    }
)
NATIVE_LAUNCHES = HTA_LAUNCHES | {
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipModuleLaunchKernel",
    "hipMemcpyAsync",
    "hipMemsetAsync",
    "hipMemcpyWithStream",
}
COLUMNS = ("correlation", "cpu_duration", "gpu_duration", "launch_delay")
KEYS = (
    "launches",
    "cpu_over_cutoff",
    "delay_over_cutoff",
    "gpu_shorter_than_cpu",
    "cpu_launch_us",
    "gpu_us",
    "median_cpu_us",
    "median_delay_us",
)


@analysis(
    "launch_stats",
    "Kernel launch statistics",
    "get_cuda_kernel_launch_stats",
    "driver (cuLaunchKernel*) and HIP launches included",
)
def launch_stats(trace: TraceSet, options: TraceOptions) -> AnalysisResult:
    launches = HTA_LAUNCHES if trace.mode is Mode.HTA else NATIVE_LAUNCHES
    tables = []
    summary_rows = []
    per_rank: dict[int, dict[str, float]] = {}
    for frame in trace.frames():
        launched = np.isin(frame.correlation, frame.correlation[frame.name_in(launches)])
        cpu = np.flatnonzero((frame.stream == -1) & launched)
        gpu = np.flatnonzero((frame.stream != -1) & launched)
        i, j = join_rows(frame.correlation[cpu], frame.correlation[gpu])
        c, g = cpu[i], gpu[j]  # HTA's merge order: CPU rows in order, then their GPU rows
        cpu_dur, gpu_dur = frame.dur[c], frame.dur[g]
        delay = np.maximum(frame.ts[g] - frame.ts[c] - cpu_dur, 0.0)
        cells = (a.tolist() for a in (frame.correlation[c], cpu_dur, gpu_dur, delay))
        rows = tuple(zip(*cells, strict=True))
        tables.append(Table(f"cuda_kernel_launch_stats_rank{frame.rank}", COLUMNS, rows))
        over = (
            int((cpu_dur > options.runtime_cutoff_us).sum()),
            int((delay > options.launch_delay_cutoff_us).sum()),
            int((gpu_dur < cpu_dur).sum()),
        )
        medians = (describe(cpu_dur)["50%"], describe(delay)["50%"])
        summary_rows.append((frame.rank, len(c), *medians, *over))
        values = (len(c), *over, cpu_dur.sum(), gpu_dur.sum(), *medians)
        per_rank[frame.rank] = dict(zip(KEYS, map(float, values), strict=True))
    cpu_over = f"cpu_gt_{options.runtime_cutoff_us:g}us"
    delay_over = f"delay_gt_{options.launch_delay_cutoff_us:g}us"
    columns = ("rank", "launches", "median_cpu_us", "median_launch_delay_us", cpu_over, delay_over)
    summary = Table("launch_summary", (*columns, "gpu_shorter_than_cpu"), tuple(summary_rows))
    return AnalysisResult("launch_stats", (summary, *tables), per_rank)
