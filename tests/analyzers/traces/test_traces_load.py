"""The streaming Kineto parser: formats it must accept, files it must refuse clearly, and
agreement with a plain `json.loads` reading of the same document however the bytes are chunked."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.traces.load import load_raw_trace
from fleetscope.errors import CorruptTraceError, TruncatedTraceError
from tests.analyzers.traces.trace_paths import DATA

NW0 = DATA / "kineto_resnet50_nw0" / "worker0.1623143089861.pt.trace.json.gz"


def write(path: Path, doc: Any, *, gz: bool = False, indent: int | None = None) -> Path:
    text = json.dumps(doc, indent=indent)
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def kineto(events: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    return {"schemaVersion": 1, **meta, "traceEvents": events}


KERNEL = {
    "ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2.6,
    "args": {"stream": 7, "correlation": 3, "External id": 9},
}  # fmt: skip
LAUNCH = {
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
    "ts": 9, "dur": 1, "args": {"correlation": 3},
}  # fmt: skip


def test_plain_and_gzip_read_the_same(tmp_path: Path) -> None:
    doc = kineto([LAUNCH, KERNEL], distributedInfo={"rank": 2})
    plain = load_raw_trace(write(tmp_path / "a.json", doc))
    packed = load_raw_trace(write(tmp_path / "b.json.gz", doc, gz=True))
    for raw in (plain, packed):
        assert raw.rank == 2 and raw.distributed_rank == 2
        assert raw.ts.tolist() == [9.0, 10.5] and raw.dur.tolist() == [1.0, 2.6]
        assert raw.stream.tolist() == [-1, 7] and raw.correlation.tolist() == [3, 3]
        assert raw.ts_has_float and raw.ts_all_present


def test_kept_rows_are_htas(tmp_path: Path) -> None:
    """Rows need `dur` and `cat`, and `cat != Trace`; positions count every event."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "ts": 1, "args": {"name": "py"}},
        {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "ts": 1, "dur": 100},
        {"ph": "s", "id": 3, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 1, "ts": 9},
        LAUNCH,
        {"ph": "i", "name": "[memory]", "pid": 1, "tid": 1, "ts": 12,
         "args": {"Device Type": 1, "Device Id": 0, "Total Allocated": 4096}},
        KERNEL,
    ]  # fmt: skip
    raw = load_raw_trace(write(tmp_path / "t.json", kineto(events)))
    assert raw.index.tolist() == [3, 5]
    assert raw.event_count == 6
    assert [raw.names[i] for i in raw.name] == ["cudaLaunchKernel", "k"]
    assert raw.mem_total_allocated.tolist() == [4096.0] and raw.mem_device_type.tolist() == [1]


def test_2021_trace_names_rank_and_integer_timestamps() -> None:
    raw = load_raw_trace(NW0)
    cats = {raw.names[i] for i in np.unique(raw.cat)}
    assert cats == {"Operator", "Runtime", "Kernel", "Memcpy", "Memset"}
    assert raw.distributed_rank is None and raw.hta_rank is None and raw.rank == 0
    assert not raw.ts_has_float and raw.ts_all_present
    assert len(raw.ts) == 44665 and raw.event_count == 75718


def test_hta_rank_needs_whitespace_after_the_colon(tmp_path: Path) -> None:
    spaced = load_raw_trace(write(tmp_path / "a.json", kineto([], distributedInfo={"rank": 5})))
    tight = tmp_path / "b.json"
    tight.write_text('{"distributedInfo": {"rank":5}, "traceEvents": []}')
    assert spaced.hta_rank == 5
    raw = load_raw_trace(tight)
    assert raw.hta_rank is None and raw.distributed_rank == 5 and raw.rank == 5


def test_cpu_only_and_rankless_traces_load(tmp_path: Path) -> None:
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 5, "dur": 2}
    raw = load_raw_trace(write(tmp_path / "cpu.json", kineto([op])))
    assert raw.rank == 0 and (raw.stream == -1).all()


def test_odd_arg_values_fall_back_to_htas_defaults(tmp_path: Path) -> None:
    event = dict(KERNEL, args={"stream": "stream 7", "correlation": None, "bytes": "x"})
    raw = load_raw_trace(write(tmp_path / "t.json", kineto([event])))
    assert raw.stream.tolist() == [-1] and raw.correlation.tolist() == [-1]
    assert raw.bytes.tolist() == [-1] and raw.memory_bw_gbps.tolist() == [0.0]


def test_blocks_per_sm_is_read_as_the_bandwidth_is_with_nan_for_none(tmp_path: Path) -> None:
    """Kineto's `blocks per SM` (int or float) as float64; absent, null or not a number: NaN;
    a number in a string is read as `float()` reads it, as the bandwidth's is."""
    values = [2, 0.25, None, "0.5", "x", [1]]
    events = [dict(KERNEL, args={"blocks per SM": v}) for v in values] + [KERNEL]
    raw = load_raw_trace(write(tmp_path / "t.json", kineto(events)))
    assert np.array_equal(raw.blocks_per_sm, [2.0, 0.25, np.nan, 0.5, np.nan, np.nan, np.nan], True)


@pytest.mark.parametrize("gz", [False, True])
def test_truncated_files_say_so(tmp_path: Path, gz: bool) -> None:
    text = NW0.read_bytes()
    body = gzip.decompress(text)[:500_000]
    path = tmp_path / ("cut.json.gz" if gz else "cut.json")
    path.write_bytes(gzip.compress(body) if gz else body)
    with pytest.raises(TruncatedTraceError, match="truncated"):
        load_raw_trace(path)


def test_a_cut_gzip_stream_is_truncated(tmp_path: Path) -> None:
    path = tmp_path / "cut.json.gz"
    path.write_bytes(NW0.read_bytes()[:200_000])
    with pytest.raises(TruncatedTraceError, match=r"cut\.json\.gz.*truncated"):
        load_raw_trace(path)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "empty"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"schemaVersion": 1}', "no 'traceEvents'"),
        (b'{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "not a Kineto trace"),
        (b'{"traceEvents": [1]}', "not an object"),
        (b'{"traceEvents": []} trailing', "extra data"),
        # A NUL after the brace made json guess UTF-16 and raise UnicodeDecodeError.
        (b'{\x00"a": 1}', "property name enclosed in double quotes at character 1"),
        (b'{"traceEvents": []\n,\x00"a": 1}', "after traceEvents: Expecting property name"),
        (b"\x89PNG\r\n\x1a\n" + bytes(100), "not UTF-8|not a Kineto trace"),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": ["a"], "pid": 1, "tid": 1, '
            b'"ts": 1, "dur": 2}]}',
            r"traceEvents\[0\] is malformed \(TypeError",
        ),
        (
            b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 1, "ts": 1'
            + b"0" * 320
            + b', "dur": 2}]}',
            "a value does not fit its column",
        ),
    ],
)
def test_corrupt_files_say_what_is_wrong(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(CorruptTraceError, match=message) as info:
        load_raw_trace(path)
    assert "bad.json" in str(info.value)


def test_a_bad_gzip_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "bad.json.gz"
    path.write_bytes(b"\x1f\x8b" + bytes(64))
    with pytest.raises(CorruptTraceError, match="gzip"):
        load_raw_trace(path)


def test_a_missing_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(CorruptTraceError, match="no such file"):
        load_raw_trace(tmp_path / "nope.json")


_number = st.one_of(
    st.integers(min_value=0, max_value=2**53),
    st.floats(min_value=0, max_value=1e13, allow_nan=False),
)
_text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "i", "s", "f", "M"]),
        "name": _text,
        "pid": st.one_of(st.integers(-5, 10**6), _text),
        "tid": st.one_of(st.integers(-5, 10**6), _text),
    },
    optional={
        "cat": st.sampled_from(["kernel", "cpu_op", "Runtime", "Trace", "gpu_memcpy"]),
        "ts": _number,
        "dur": _number,
        "args": st.fixed_dictionaries(
            {},
            optional={
                "stream": st.one_of(st.integers(-1, 100), _text),
                "correlation": st.integers(-1, 10**9),
                "memory bandwidth (GB/s)": st.floats(0, 1e4, allow_nan=False),
                "blocks per SM": st.one_of(st.integers(0, 10**4), st.floats(0, 1e4)),
                "bytes": st.integers(0, 10**12),
                "External id": st.integers(0, 10**6),
                "nested": st.lists(st.dictionaries(_text, _number, max_size=3), max_size=3),
            },
        ),
    },
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    events=st.lists(_event, max_size=40),
    indent=st.sampled_from([None, 0, 2]),
    chunk=st.integers(min_value=1, max_value=300),
    gz=st.booleans(),
)
def test_any_chunking_reads_like_json_loads(
    tmp_path: Path, events: list[dict[str, Any]], indent: int | None, chunk: int, gz: bool
) -> None:
    """Property: the streaming reader equals a `json.loads` reading, for any chunk size."""
    path = write(tmp_path / ("p.json.gz" if gz else "p.json"), kineto(events), gz=gz, indent=indent)
    raw = load_raw_trace(path, chunk_size=chunk)
    kept = [
        (i, e) for i, e in enumerate(events)
        if e.get("dur") is not None and e.get("cat") not in (None, "Trace") and "ts" in e
    ]  # fmt: skip
    assert raw.event_count == len(events)
    assert raw.index.tolist() == [i for i, _ in kept]
    assert [raw.names[n] for n in raw.name] == [e["name"] for _, e in kept]
    assert raw.ts.tolist() == [float(e["ts"]) for _, e in kept]
    assert raw.dur.tolist() == [float(e["dur"]) for _, e in kept]

    def stream(e: dict[str, Any]) -> int:
        """HTA's `normalize_gpu_stream_numbers`: int(value), -1 when that fails."""
        try:
            return int(e.get("args", {}).get("stream", -1))
        except ValueError:
            return -1

    assert raw.stream.tolist() == [stream(e) for _, e in kept]
    assert raw.ts_all_present == all("ts" in e for e in events)
    assert raw.ts_has_float == any(isinstance(e.get("ts"), float) for e in events)
