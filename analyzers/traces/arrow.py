"""Columnar tables of a prepared trace, for the warehouse to store (DuckDB / Parquet).

`to_arrow_tables(trace)` returns `{"trace_events": ..., "trace_kernels": ...}`: every kept event
with its rank, decoded category and name, times in microseconds from the trace's origin, and the
GPU-only subset with its kernel class and launching call. Storing them is the warehouse's job;
this module only builds the tables. pyarrow is imported here and nowhere else in the trace code,
so analyses do not pay its memory.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from analyzers.traces.classify import KernelClass
from analyzers.traces.frame import TraceSet

__all__ = ["to_arrow_tables"]


def to_arrow_tables(trace: TraceSet) -> dict[str, pa.Table]:
    events: list[pa.Table] = []
    kernels: list[pa.Table] = []
    for frame in trace.frames():
        names = pa.array(frame.names, pa.string())
        n = len(frame)
        rank = pa.array(np.full(n, frame.rank, dtype=np.int32))
        cat = pa.DictionaryArray.from_arrays(pa.array(frame.cat), names)
        name = pa.DictionaryArray.from_arrays(pa.array(frame.name), names)
        events.append(
            pa.table(
                {
                    "rank": rank,
                    "event_index": pa.array(frame.index),
                    "cat": cat,
                    "name": name,
                    "pid": pa.DictionaryArray.from_arrays(pa.array(frame.pid), names),
                    "tid": pa.DictionaryArray.from_arrays(pa.array(frame.tid), names),
                    "ts_us": pa.array(frame.ts),
                    "dur_us": pa.array(frame.dur),
                    "stream": pa.array(frame.stream),
                    "correlation": pa.array(frame.correlation),
                    "external_id": pa.array(frame.external_id),
                    "linked_event_index": pa.array(frame.index_correlation),
                }
            )
        )
        gpu = np.flatnonzero(frame.on_stream)
        classes = [KernelClass(int(c)).name for c in frame.kernel_class[gpu].tolist()]
        kernels.append(
            pa.table(
                {
                    "rank": pa.array(np.full(len(gpu), frame.rank, dtype=np.int32)),
                    "event_index": pa.array(frame.index[gpu]),
                    "name": name.take(pa.array(gpu)),
                    "kernel_class": pa.array(classes, pa.string()),
                    "stream": pa.array(frame.stream[gpu]),
                    "ts_us": pa.array(frame.ts[gpu]),
                    "dur_us": pa.array(frame.dur[gpu]),
                    "bytes": pa.array(frame.bytes[gpu]),
                    "memory_bw_gbps": pa.array(frame.memory_bw_gbps[gpu]),
                    "launch_event_index": pa.array(frame.index_correlation[gpu]),
                }
            )
        )
    return {
        "trace_events": _concat(events),
        "trace_kernels": _concat(kernels),
    }


def _concat(tables: list[pa.Table]) -> pa.Table:
    if not tables:
        return pa.table({})
    # Each rank has its own symbol dictionary: unify before concatenating.
    return pa.concat_tables(
        [t.unify_dictionaries() for t in tables], promote_options="permissive"
    ).unify_dictionaries()
