"""The prepared trace every analysis reads: a `TraceSet` of one `RankFrame` of numpy columns per
rank. Analyses never mutate a frame; row order matters in HTA mode (HTA's tie-breaking).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping, ValuesView
from dataclasses import dataclass, field, fields
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from analyzers.traces.classify import Classifier, KernelClass
from fleetscope.errors import TraceError

if TYPE_CHECKING:
    from pathlib import Path

    import numpy.typing as npt

F64: TypeAlias = "npt.NDArray[np.float64]"
I64: TypeAlias = "npt.NDArray[np.int64]"
I32: TypeAlias = "npt.NDArray[np.int32]"
Mask: TypeAlias = "npt.NDArray[np.bool_]"

# Categories of GPU activity rows, 2021 and current names (HTA's idle-time kernel filter).
GPU_OP_CATS = frozenset(
    {"kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy", "mtia_ccp_events"}
)
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver"})
CPU_OP_CATS = frozenset({"cpu_op", "Operator"})


@dataclass(eq=False)
class RowColumns:
    """The columns a `RankFrame` shares with its `load.RawTrace`. `names` decodes `cat`, `name`,
    `pid` and `tid` (-1: the key was absent). `index` is the event's position in its file's
    `traceEvents`. `stream`, `correlation`, `bytes` and `external_id` are -1 when absent; `stream`
    is -1 when not an integer (HTA's `normalize_gpu_stream_numbers`); `memory_bw_gbps` is 0.0 when
    absent (HTA's default); `blocks_per_sm` (a kernel's grid blocks / the GPU's SMs, as Kineto
    writes it) NaN when absent. The `mem_` columns are the `[memory]` allocator events: time,
    device type (0 CPU, 1 CUDA), bytes allocated in total after the event."""

    path: Path
    metadata: dict[str, Any]
    names: list[str]
    index: I64
    cat: I32
    name: I32
    pid: I32
    tid: I32
    ts: F64
    dur: F64
    stream: I64
    correlation: I64
    memory_bw_gbps: F64
    blocks_per_sm: F64
    bytes: I64
    external_id: I64
    mem_ts: F64
    mem_device_type: I64
    mem_total_allocated: F64


_SHARED = tuple(f.name for f in fields(RowColumns))  # what a frame takes over from its RawTrace
ROW_COLUMNS = _SHARED[3:-3]  # `index` to `external_id`
MEM_COLUMNS = _SHARED[-3:]  # the `[memory]` events'


class Mode(StrEnum):
    HTA = "hta"  # HTA 0.5.0's load rules and definitions, to agree with it number for number
    NATIVE = "native"  # fleetscope's definitions (trace-semantics.md, "Where we go beyond HTA")


@dataclass(eq=False)
class RankFrame(RowColumns):
    """One rank's kept events as columns. `index_correlation` is the `index` of the linked CPU
    launch (for a GPU row) or GPU op (for a CPU row), -1 when none, 0 when HTA found a correlation
    but no partner (HTA's convention). `ts_int`: HTA would hold `ts` as integers (its unstable
    sorts break ties by it)."""

    rank: int
    classifier: Classifier
    ts_int: bool = False
    index_correlation: I64 = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    # What analyses compute once per rank and share (the critical path). A field, not a cache
    # keyed by the frame: a spilled set makes a new frame object each time it maps a rank.
    memo: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of_raw(cls, raw: Any, rank: int, classifier: Classifier, **overrides: Any) -> RankFrame:
        """A frame of a `load.RawTrace`'s columns; `overrides` replace some (HTA's rounded `ts`)."""
        values = {key: getattr(raw, key) for key in _SHARED} | overrides
        return cls(**values, rank=rank, classifier=classifier)

    def __len__(self) -> int:
        return len(self.ts)

    @cached_property
    def symbols(self) -> dict[str, int]:
        return {text: i for i, text in enumerate(self.names)}

    @cached_property
    def texts(self) -> list[str]:
        """`names` and "", which symbol -1 (a row without a name) reads: `frame.texts[code]`."""
        return [*self.names, ""]

    def sym(self, text: str) -> int:
        """The symbol id of `text`, -2 when absent: equal to no row's, not even a row's without a
        name (-1), which `frame.name == frame.sym(...)` would otherwise select."""
        return self.symbols.get(text, -2)

    @cached_property
    def end(self) -> F64:
        return self.ts + self.dur

    def cat_in(self, cats: frozenset[str]) -> Mask:
        return self._symbol_in(self.cat, cats)

    def name_in(self, names: frozenset[str] | set[str]) -> Mask:
        return self._symbol_in(self.name, names)

    def _symbol_in(self, column: npt.NDArray[np.int32], texts: frozenset[str] | set[str]) -> Mask:
        # One gather from a table by symbol id (np.isin also scans the column for its range).
        table = np.zeros(len(self.names) + 1, dtype=bool)  # the last entry: -1, an absent key
        table[[self.symbols[t] for t in texts if t in self.symbols]] = True
        return table[column]

    def names_matching(self, predicate: Any) -> Mask:
        """Rows whose name satisfies `predicate(str)`, evaluated once per symbol and frame."""
        hits: dict[Any, Mask] = self.memo.setdefault("symbol_hits", {})
        hit = hits.get(predicate)
        if hit is None:
            hit = hits[predicate] = np.fromiter(
                (bool(predicate(s)) for s in self.texts), bool, len(self.names) + 1
            )
        return hit[self.name]

    @cached_property
    def on_stream(self) -> Mask:
        """HTA's GPU set for breakdowns: every row with `stream != -1` (section 3)."""
        mask: Mask = self.stream != -1
        return mask

    @cached_property
    def gpu_op(self) -> Mask:
        """Kernels, memcpy and memset rows on a stream (HTA's idle-time filter, section 4)."""
        return self.on_stream & self.cat_in(GPU_OP_CATS)

    @cached_property
    def kernel_class(self) -> npt.NDArray[np.int8]:
        """Every row's `KernelClass`; only GPU rows' names are classified (CPU ops' are many)."""
        names = self.texts
        table = np.zeros(len(names), dtype=np.int8)
        used = np.bincount(self.name[self.on_stream] + 1)  # not a sort; -1 (no name) at 0
        for code in (np.flatnonzero(used) - 1).tolist():
            table[code] = int(self.classifier(names[code]))
        return table[self.name]

    def of_class(self, kind: KernelClass) -> Mask:
        mask: Mask = self.on_stream & (self.kernel_class == int(kind))
        return mask

    def sort_key(self, values: F64) -> npt.NDArray[Any]:
        """`values` in the dtype HTA sorts them in (int64 when its `ts` column is integer)."""
        return values.astype(np.int64) if self.ts_int else values

    def link(self, cpu_rows: I64, gpu_rows: I64, out: I64) -> I64:
        """`out` with each CPU row at the `index` of the last GPU row with its correlation and
        vice versa, as HTA's `transform_correlation_to_index` (a dict built in row order)."""
        if not len(cpu_rows) or not len(gpu_rows):
            return out
        corr = self.correlation
        for rows, partners in ((cpu_rows, gpu_rows), (gpu_rows, cpu_rows)):
            keys, last = last_row_per_key(corr[partners], partners)
            at = np.minimum(np.searchsorted(keys, corr[rows]), len(keys) - 1)
            found = keys[at] == corr[rows]
            out[rows[found]] = self.index[last[at[found]]]
        return out

    def linked_rows(self, rows: I64) -> I64:
        """Each of `rows`' linked row (-1: none or not kept; of two with one index, the last)."""
        size = int(self.index.max()) + 1 if len(self) else 1
        row_of = np.full(size, -1, dtype=np.int64)
        row_of[self.index] = np.arange(len(self), dtype=np.int64)
        link = self.index_correlation[rows]
        found = (link >= 0) & (link < size)
        return np.where(found, row_of[np.where(found, link, 0)], -1)

    @property
    def device_properties(self) -> list[dict[str, Any]]:
        props = self.metadata.get("deviceProperties")
        return [p for p in props if isinstance(p, dict)] if isinstance(props, list) else []


def last_row_per_key(keys: I64, rows: I64) -> tuple[I64, I64]:
    """The distinct keys, sorted, and for each the last of `rows` (ascending) holding it."""
    distinct, first_from_end = np.unique(keys[::-1], return_index=True)
    return distinct, rows[len(keys) - 1 - first_from_end]


@dataclass(eq=False)
class TraceSet:
    """The ranks of one profiling session, in rank order: a dict, or `spill.SpilledFrames` for a
    large set, so a loop over `frames()` holds one rank at a time."""

    mode: Mode
    ranks: Mapping[int, RankFrame]
    source: Path
    origin_us: float = 0.0  # the raw timestamp that became 0 (alignment)
    notes: list[str] = field(default_factory=list)

    def frames(self) -> ValuesView[RankFrame]:
        return self.ranks.values()


def gather_ranks(
    rank_frames: Iterable[RankFrame],
    frames: MutableMapping[int, RankFrame] | None,
    repeated: Callable[[int, Path, Path], None],
) -> tuple[MutableMapping[int, RankFrame], Path, float]:
    """Keep each frame by rank as it comes (so a loading generator holds one file's raw columns);
    `repeated` hears of a rank seen twice (the later is kept). Returns the frames in rank order,
    the set's source (its file, or the folder of several) and its earliest start (0.0 if none)."""
    frames = {} if frames is None else frames
    starts: dict[int, float] = {}
    files: list[Path] = []
    for frame in rank_frames:
        rank = frame.rank
        if rank in frames:
            repeated(rank, frames[rank].path, frame.path)
        files.append(frame.path)
        starts.pop(rank, None)
        if len(frame):
            starts[rank] = float(frame.ts.min())
        frames[rank] = frame
        del frame  # its columns die here, before the next file is read
    if not files:
        raise TraceError("no trace files to prepare")
    if isinstance(frames, dict):
        frames = {rank: frames[rank] for rank in sorted(frames)}
    origin = min(starts[r] for r in sorted(starts)) if starts else 0.0  # as HTA: rank order
    return frames, files[0].parent if len(files) > 1 else files[0], origin
