"""What every trace analysis shares: its options, its result, its registry (`@analysis`), and the
GPU busy intervals several read (`gpu_busy`). An analysis is a function `(TraceSet, TraceOptions)
-> AnalysisResult` (no I/O); a result holds tables (printed, and compared with HTA's CSVs under
HTA's column names) and `per_rank` key numbers that the trace rules and the what-if read.
"""

# No `from __future__ import annotations`: NamedTuple would compile every string annotation into
# a ForwardRef at import; the names the annotations use are defined before them.
import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import F64, RankFrame, TraceSet
from analyzers.traces.stats import union_intervals


class TraceOptions(NamedTuple):
    """Thresholds and assumptions, each with its source (rules.md) as the default."""

    # HTA get_idle_time_breakdown default, in us (its docstring says ns; it compares us).
    consecutive_kernel_delay_us: float = 30.0
    num_kernels: int = 10  # HTA get_gpu_kernel_breakdown / _aggr_gpu_kernel_time defaults
    duration_ratio: float = 0.8
    runtime_cutoff_us: float = 50.0  # HTA get_cuda_kernel_launch_stats outlier cutoffs (T2)
    launch_delay_cutoff_us: float = 100.0
    max_queue_length: int = 1024  # T3: CUDA's stream queue (HTA CUDA_MAX_LAUNCH_QUEUE_PER_STREAM)
    gpu_gap_threshold_us: float = 500_000.0  # Nsight Systems `gpu_gaps` rule default (T4)
    util_chunks: int = 30  # Nsight Systems `gpu_time_util` rule defaults (T5)
    util_threshold_pct: float = 50.0
    # TB plugin data-loader recommendation (T8/P1) and TF profiler's "highly input bound".
    dataloader_share_warn: float = 0.05
    dataloader_share_critical: float = 0.20
    communication_share_warn: float = 0.10  # TB plugin communication recommendation (T9)
    memory_near_capacity: float = 0.90  # TB plugin memory recommendation (T11)
    # What-if assumptions (Daydream-style replay, sources in whatif.py).
    amp_tensor_core_speedup: float = 3.0  # fp32 GEMM/conv -> tensor cores (interval 2-4x)
    amp_memory_speedup: float = 1.7  # memory-bound kernels move half the bytes (1.3-2x)
    amp_cpu_speedup: float = 1.3  # bf16 autocast matmul/conv on an AVX512_BF16 CPU (0.8-2x)
    dataloader_workers: int = 4  # the workers the dataloader_workers scenario gives the job
    worker_contention: float = 0.35  # kappa: main-thread stretch per core of worker load
    host_cores: int = 0  # the host's cores, 0: unknown (then kappa alone)
    main_threads: int = 1  # cores the training process keeps busy by itself
    comm_bandwidth_ratio: float = 2.0  # the comm_bandwidth scenario's bandwidth multiple
    pinned_copy_speedup: float = 2.0
    sync_overhead_us: float = 5.0
    hours_per_week: float = 168.0
    gpus: int = 0  # GPUs the job holds; 0: the trace's world size, else its rank count
    top_kernels: int = 10


class Table(NamedTuple):
    """Rows with named columns; `name` is stable (JSON key, HTA CSV stem where HTA has one)."""

    name: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]


@dataclass(frozen=True)
class AnalysisResult:
    """One analysis's tables, key numbers per rank and notes."""

    name: str
    tables: tuple[Table, ...] = ()
    per_rank: dict[int, dict[str, float]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def table(self, name: str) -> Table:
        return {table.name: table for table in self.tables}[name]

    def value(self, rank: int, key: str, default: float = math.nan) -> float:
        return self.per_rank.get(rank, {}).get(key, default)


AnalysisFn = Callable[[TraceSet, TraceOptions], AnalysisResult]


class AnalysisSpec(NamedTuple):
    name: str
    title: str
    hta_api: str | None  # the HTA 0.5.0 call it reproduces in --hta-compatible mode
    beyond_hta: str  # what the native mode does differently, or what HTA lacks
    fn: AnalysisFn


REGISTRY: dict[str, AnalysisSpec] = {}


def analysis(
    name: str, title: str, hta_api: str | None, beyond_hta: str
) -> Callable[[AnalysisFn], AnalysisFn]:
    """Register an analysis under `name` (names are unique)."""

    def wrap(fn: AnalysisFn) -> AnalysisFn:
        if name in REGISTRY:
            raise ValueError(f"trace analysis {name!r} registered twice")
        REGISTRY[name] = AnalysisSpec(name, title, hta_api, beyond_hta, fn)
        return fn

    return wrap


class RankRows(NamedTuple):
    """What an analysis written for one rank (`rank_by_rank`) gives for a rank."""

    rows: Iterable[tuple[Any, ...]] = ()
    values: dict[str, float] | None = None  # its key numbers (None: no entry)
    note: str = ""  # what to say of the rank, if anything
    more_rows: Iterable[tuple[Any, ...]] = ()  # the second table's, if any


RankFn = Callable[[RankFrame, TraceOptions], RankRows]


def rank_by_rank(
    table: str, columns: tuple[str, ...], second: tuple[str, tuple[str, ...]] | None = None
) -> Callable[[RankFn], AnalysisFn]:
    """An analysis of one table (or two) written for one rank; the result, named as the
    function, holds every rank's rows, key numbers and notes."""

    def wrap(fn: RankFn) -> AnalysisFn:
        @functools.wraps(fn)  # its name and module (the report order) stay the function's
        def run(trace: TraceSet, options: TraceOptions) -> AnalysisResult:
            rows: list[tuple[Any, ...]] = []
            more: list[tuple[Any, ...]] = []
            per_rank, notes = {}, []
            for frame in trace.frames():
                found = fn(frame, options)
                rows += found.rows
                more += found.more_rows
                if found.values is not None:
                    per_rank[frame.rank] = found.values
                if found.note:
                    notes.append(f"rank {frame.rank}: {found.note}")
            tables = [Table(table, columns, tuple(rows))]
            tables += [Table(*second, tuple(more))] if second else []
            return AnalysisResult(fn.__name__, tuple(tables), per_rank, tuple(notes))

        return run

    return wrap


def gpu_busy(frame: RankFrame, kind: KernelClass | None = None) -> tuple[F64, F64]:
    """The merged busy intervals of the rank's GPU rows, or one kernel class's; memoised."""
    key = f"gpu_busy {kind}"
    if key not in frame.memo:
        rows = frame.on_stream if kind is None else frame.of_class(kind)
        frame.memo[key] = union_intervals(frame.ts[rows], frame.end[rows])
    return cast(tuple[F64, F64], frame.memo[key])
