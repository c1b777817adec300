"""The trace decoder (analyzers/traces/load_fast.py) reads every file exactly as the stdlib oracle
does (tests/analyzers/traces/stdlib_oracle.py, once the product's second decoder), takes the golden
traces in its C pass without its element-by-element walk, and says itself what is wrong with a
file it cannot read. Every specification here runs twice: with the C pass
(analyzers/traces/_kineto_columns.c), and with a C pass that takes nothing, so that the walk
(`json` and the reference rules) takes every element."""

from __future__ import annotations

import dataclasses
import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzers.traces import load_fast
from analyzers.traces.load import RawTrace, load_raw_trace
from fleetscope.errors import CorruptTraceError
from tests.analyzers.traces.stdlib_oracle import load_stdlib
from tests.analyzers.traces.trace_paths import ALL_TRACES


def take_nothing(text: object, base: int, symbols: object) -> tuple[int, int, bool, bool, dict]:
    """The C pass's answer when it takes no element."""
    return 0, 0, False, True, {}


@pytest.fixture(autouse=True, params=["c", "json"])
def columns_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "json":
        monkeypatch.setattr(load_fast, "_decode_columns", take_nothing)
    return str(request.param)


def differences(fast: RawTrace, reference: RawTrace) -> list[str]:
    """Fields of two RawTraces that differ (arrays: values, NaN positions and dtype)."""
    out = []
    for spec in dataclasses.fields(RawTrace):
        a, b = getattr(fast, spec.name), getattr(reference, spec.name)
        if isinstance(a, np.ndarray):
            same = a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)
        else:
            same = a == b
        if not same:
            out.append(spec.name)
    return out


def walked(path: Path, chunk_size: int = 1 << 20) -> tuple[RawTrace, int]:
    """The file loaded, and how many of its events the walk took (the C pass the others)."""
    taken = []
    walk = load_fast._Events.walk

    def counting(self: load_fast._Events, text: object, *, eof: bool) -> int:
        before = self.position
        dropped = walk(self, text, eof=eof)  # type: ignore[arg-type]
        taken.append(self.position - before)
        return dropped

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(load_fast._Events, "walk", counting)
        raw = load_raw_trace(path, chunk_size=chunk_size)
    return raw, sum(taken)


def fast_only(path: Path, chunk_size: int = 1 << 20) -> RawTrace:
    """Load, failing the test if the walk took any event where the C pass takes events (except
    in the golden AMD trace: its string stream ids)."""
    raw, count = walked(path, chunk_size)
    odd = path.parent.name == "hta_amd_mi250_minitoy" or load_fast._decode_columns is take_nothing
    assert count == 0 or odd, f"the walk took {count} events"
    return raw


def both(path: Path, chunk_size: int = 1 << 20) -> tuple[RawTrace, RawTrace]:
    """The product's decoder and the oracle, on one file."""
    return (
        load_raw_trace(path, chunk_size=chunk_size),
        load_stdlib(path, chunk_size=chunk_size),
    )


@pytest.mark.parametrize(
    "trace_file",
    [f for d in ALL_TRACES for f in sorted(d.glob("*.gz"))],
    ids=lambda p: p.parent.name,
)
def test_golden_traces_take_the_fast_path_and_read_like_stdlib(trace_file: Path) -> None:
    fast = fast_only(trace_file)
    reference = load_stdlib(trace_file)
    assert differences(fast, reference) == []
    assert fast.metadata == reference.metadata


def write_raw(path: Path, text: str, *, gz: bool = False) -> Path:
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


KERNEL = (
    '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2.6, '
    '"args": {"stream": 7, "correlation": 3, "External id": 9}}'
)
# Documents whose every event the decoder must read as the stdlib path does, at every chunk size:
# each one a shape that a chunk border, the C pass or the walk could misread.
ODD_DOCUMENTS = {
    "cut inside a name": '{"traceEvents": [' + KERNEL + ', {"ph": "X", "cat": "cpu_op", '
    '"name": "a},{\\"b\\": [}, ]", "ts": 1, "dur": 2}, ' + KERNEL + "]}",
    "nested objects in args": '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "n", '
    '"ts": 1, "dur": 2, "args": {"x": [{"a": 1}, {"b": {"c": 2}}], "stream": 3}}, ' + KERNEL + "]}",
    "metadata after the events, with its own `},`": '{"schemaVersion": 1, "traceEvents": ['
    + KERNEL
    + ", "
    + KERNEL
    + '], "deviceProperties": [{"id": 0}, {"id": 1}], "distributedInfo": {"rank": 3}}',
    "events first, no other member": '{"traceEvents" : [ ' + KERNEL + " ] }",
    "empty events": '{"a": {"b": [1, {"c": 2}]}, "traceEvents": []}',
    "nulls and odd types": '{"traceEvents": ['
    '{"ph": "X", "cat": "kernel", "name": "a", "ts": 1, "dur": 2, "args": null}, '
    '{"ph": "X", "cat": "kernel", "name": "b", "ts": 1, "dur": 2, "args": {"stream": null}}, '
    '{"ph": "X", "cat": "kernel", "name": "c", "ts": 1, "dur": 2, "args": {"stream": 7.0}}, '
    '{"ph": "X", "cat": "kernel", "name": "d", "ts": "5", "dur": "2", "pid": true}, '
    '{"ph": "X", "cat": 5, "name": 6, "ts": 1, "dur": 2, "args": {"bytes": "12"}}, '
    + KERNEL
    + "]}",
    "both external id spellings": '{"traceEvents": ['
    '{"ph": "X", "cat": "Runtime", "name": "a", "ts": 1, "dur": 2, "args": {"external id": 4}}, '
    '{"ph": "X", "cat": "Runtime", "name": "b", "ts": 1, "dur": 2, '
    '"args": {"External id": null, "external id": 5}}, '
    '{"ph": "X", "cat": "Runtime", "name": "c", "ts": 1, "dur": 2, '
    '"args": {"External id": -1, "external id": 6}}, '
    '{"ph": "X", "cat": "Runtime", "name": "d", "ts": 1, "dur": 2, "args": {"External id": 8}}]}',
    "memory counters": '{"traceEvents": ['
    '{"ph": "i", "name": "[memory]", "ts": 3, "args": {"Device Type": 1, "Device Id": 0, '
    '"Total Allocated": 4096}}, '
    '{"ph": "i", "name": "[memory]", "ts": 4, "args": {}}, '
    '{"ph": "i", "name": "[memory]", "ts": 5}, '
    '{"ph": "i", "name": "[memory]", "args": {"Device Type": 1}}, '
    '{"ph": "i", "name": "[memory]", "ts": 6.5, "args": {"Device Type": "1", '
    '"Total Allocated": 1.5}}, ' + KERNEL + "]}",
    "wide integers": '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "w", '
    '"ts": 9007199254740993, "dur": 1, "args": {"correlation": 9223372036854775807, '
    '"External id": -9223372036854775808, "bytes": 9007199254740993}}]}',
    "multi-byte characters": '{"traceEvents": ['
    + ", ".join(
        '{"ph": "X", "cat": "cpu_op", "name": "' + "é😀ü"[i % 3] * (i + 1) + '", "ts": 1, "dur": 2}'
        for i in range(12)
    )
    + "]}",
    "a rank that a chunk border can cut": '{"distributedInfo": {"rank":   12345}, '
    '"traceEvents": [' + KERNEL + "]}",
}


@pytest.mark.parametrize("name", sorted(ODD_DOCUMENTS))
@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_odd_documents_read_like_stdlib(tmp_path: Path, name: str, chunk: int) -> None:
    path = write_raw(tmp_path / "t.json", ODD_DOCUMENTS[name])
    fast, reference = both(path, chunk)
    assert differences(fast, reference) == []
    assert (
        fast.metadata
        == reference.metadata
        == {k: v for k, v in json.loads(ODD_DOCUMENTS[name]).items() if k != "traceEvents"}
    )


def test_a_rank_cut_by_a_chunk_border_keeps_its_digits(tmp_path: Path) -> None:
    path = write_raw(tmp_path / "t.json", ODD_DOCUMENTS["a rank that a chunk border can cut"])
    for chunk in range(1, 60):
        fast, reference = both(path, chunk)
        assert fast.hta_rank == reference.hta_rank == 12345, chunk


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # (NaN as a `ts` or `dur` is refused: test_traces_refusals.py)
        (
            '{"traceEvents": [{"name": "n", "cat": "k", "ts": 1, "dur": 1, "args": {"x": NaN}}]}',
            ["n"],
        ),
        ('{"traceEvents": [{"name": "\\ud800", "cat": "k", "ts": 1, "dur": 1}]}', ["\ud800"]),
        (
            '{"x": "traceEvents", "traceEvents": [{"name": "y", "cat": "k", "ts": 1, "dur": 1}]}',
            ["y"],
        ),
        ('[{"traceEvents": []}, {"traceEvents": []}]', None),
    ],
    ids=["NaN", "lone surrogate", "traceEvents as a value", "not an object"],
)
def test_what_strict_json_refuses_the_stdlib_path_reads(
    tmp_path: Path, text: str, expected: list[str] | None
) -> None:
    """NaN literals (where no analysis reads them), lone surrogates, the key as a value, a top
    level it does not know: they keep working (or failing) as in the oracle."""
    path = write_raw(tmp_path / "t.json", text)
    if expected is None:
        with pytest.raises(CorruptTraceError, match="expected a JSON object"):
            load_raw_trace(path)
        return
    fast, reference = both(path)
    assert differences(fast, reference) == []
    assert [fast.names[i] for i in fast.name] == expected


@pytest.mark.parametrize("chunk", [64, 1 << 20])
def test_an_odd_element_mid_file_costs_only_its_chunk(
    tmp_path: Path, chunk: int, columns_path: str
) -> None:
    """A NaN where no analysis reads it, 50 events into the file: the walk takes it and the rest
    of the text read, the C pass the events before it and the chunks after it."""
    odd = '{"ph": "X", "cat": "kernel", "name": "odd", "ts": 1, "dur": 1, "args": {"x": NaN}}'
    text = '{"traceEvents": [' + ", ".join([KERNEL] * 50 + [odd] + [KERNEL] * 50) + "]}"
    path = write_raw(tmp_path / "t.json", text)
    fast, count = walked(path, chunk)
    assert differences(fast, load_stdlib(path, chunk_size=chunk)) == []
    assert len(fast.ts) == 101
    if columns_path == "c":
        assert count == 51 if chunk > len(text) else count <= 2


def test_a_broken_element_mid_file_is_named(tmp_path: Path) -> None:
    broken = '{"ph": "X", "cat": "kernel", "name": "b", "ts": 1, "dur": 1 "args": {}}'
    text = '{"traceEvents": [' + ", ".join([KERNEL] * 50 + [broken] + [KERNEL] * 50) + "]}"
    path = write_raw(tmp_path / "t.json", text)
    with pytest.raises(CorruptTraceError, match=r"t\.json: not a Kineto trace: traceEvents\[50\]"):
        load_raw_trace(path, chunk_size=64)


def test_a_repeated_traceevents_key_is_refused(tmp_path: Path) -> None:
    """JSON leaves a repeated key to the reader (HTA's json.load keeps the last array, the oracle
    reads both); the decoder refuses the file rather than pick one."""
    text = '{"traceEvents": [], "traceEvents": [{"name": "x", "cat": "k", "ts": 1, "dur": 1}]}'
    with pytest.raises(CorruptTraceError, match="a second 'traceEvents' key"):
        load_raw_trace(write_raw(tmp_path / "t.json", text))


def test_a_damaged_gzip_body_is_corrupt(tmp_path: Path) -> None:
    packed = bytearray(gzip.compress(ODD_DOCUMENTS["multi-byte characters"].encode() * 50))
    packed[200:264] = bytes(64)
    path = tmp_path / "bad.json.gz"
    path.write_bytes(packed)
    with pytest.raises(CorruptTraceError, match=r"bad\.json\.gz: not a valid gzip file"):
        load_raw_trace(path)


def test_invalid_utf8_in_a_skipped_field_is_still_refused(tmp_path: Path) -> None:
    """The C pass does not check the strings it skips; the loader does."""
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"traceEvents": [{"ph": "X\xff", "cat": "k", "ts": 1, "dur": 1}]}')
    with pytest.raises(CorruptTraceError, match="not UTF-8"):
        load_raw_trace(path)


_tricky_text = st.text(alphabet=st.sampled_from('ab},{[]": \\\n\té😀'), max_size=10)
_int = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_value = st.one_of(st.none(), st.booleans(), _int, st.floats(allow_nan=False, allow_infinity=False))
_event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "i", "s", "M"])},
    optional={
        "name": st.one_of(_tricky_text, st.just("[memory]"), st.integers(0, 3)),
        "cat": st.one_of(st.sampled_from(["kernel", "cpu_op", "Runtime", "Trace"]), _value),
        "pid": st.one_of(st.integers(-5, 5), _tricky_text, st.none()),
        "tid": st.one_of(st.integers(-5, 5), _tricky_text),
        "ts": st.one_of(st.integers(0, 2**60), st.floats(0, 1e16), st.none(), _tricky_text),
        "dur": st.one_of(st.integers(0, 10**6), st.floats(0, 1e6), st.none()),
        "args": st.one_of(
            st.none(),
            st.lists(_value, max_size=2),
            st.fixed_dictionaries(
                {},
                optional={
                    "stream": st.one_of(st.integers(-1, 100), _value, _tricky_text),
                    "correlation": _value,
                    "External id": _value,
                    "external id": _value,
                    "memory bandwidth (GB/s)": _value,
                    "bytes": _value,
                    "Device Type": st.one_of(_value, _tricky_text),
                    "Device Id": _value,
                    "Total Allocated": _value,
                    "nested": st.lists(st.dictionaries(_tricky_text, _value, max_size=2)),
                },
            ),
        ),
    },
)
_metadata = st.dictionaries(
    st.sampled_from(["schemaVersion", "deviceProperties", "distributedInfo", "x},"]),
    st.one_of(_value, st.lists(st.dictionaries(_tricky_text, _value, max_size=2), max_size=2)),
    max_size=3,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    events=st.lists(_event, max_size=30),
    before=_metadata,
    after=_metadata,
    indent=st.sampled_from([None, 0, 2]),
    ascii_only=st.booleans(),
    chunk=st.one_of(st.integers(min_value=1, max_value=400), st.just(1 << 20)),
    gz=st.booleans(),
)
def test_any_document_reads_like_stdlib(
    tmp_path: Path,
    events: list[dict[str, Any]],
    before: dict[str, Any],
    after: dict[str, Any],
    indent: int | None,
    ascii_only: bool,
    chunk: int,
    gz: bool,
) -> None:
    """Property: same columns, metadata and rank from both decoders, for any chunk size."""

    def dump(value: Any) -> str:
        return json.dumps(value, indent=indent, ensure_ascii=ascii_only)

    members = [f"{dump(k)}: {dump(v)}" for k, v in before.items() if k not in after]
    members.append(f'"traceEvents": {dump(events)}')
    members += [f"{dump(k)}: {dump(v)}" for k, v in after.items()]
    path = write_raw(tmp_path / "p.json", "{" + ", ".join(members) + "}", gz=gz)
    fast, reference = both(path, chunk)
    assert differences(fast, reference) == []
    assert fast.metadata == reference.metadata


def test_an_element_longer_than_many_chunks_is_read_again_only_as_the_text_doubles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each reading of an unfinished element scans it whole; one reading per chunk made a long
    # element (a hostile file's, up to the 64 MiB cap) quadratic. 1 MiB of args at 8 KiB a chunk:
    # 128 chunks, read again at each doubling of the text only.
    big = KERNEL.replace('"args": {', '"args": {"blob": "' + "x" * (1 << 20) + '", ')
    path = write_raw(tmp_path / "t.json", '{"traceEvents": [' + big + ", " + KERNEL + "]}")
    walks = []
    walk = load_fast._Events.walk

    def counted(self: Any, text: Any, *, eof: bool) -> int:
        walks.append(text.length)
        return walk(self, text, eof=eof)

    monkeypatch.setattr(load_fast._Events, "walk", counted)
    fast, reference = both(path, chunk_size=8 << 10)
    assert differences(fast, reference) == [] and fast.event_count == 2
    assert len(walks) <= 10  # log2(128) + the last
