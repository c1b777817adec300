"""The C column pass of the trace decoder (analyzers/traces/_kineto_columns.c) gives the columns
the reference rules give (stdlib json's decode reduced by columns.event_sink), symbol ids
included, for every event it takes, on real and generated text; it reads every number as Python's
json does; and it stops at the first element that is not strict JSON of the event shapes it
knows: the reference rules decide that one."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.traces import load_fast
from analyzers.traces._kineto_columns import decode_events
from analyzers.traces.columns import DTYPES, ColumnBuilder, SymbolTable, event_sink
from analyzers.traces.load import load_raw_trace
from tests.analyzers.traces.test_traces_load_fast import differences, take_nothing
from tests.analyzers.traces.trace_paths import ALL_TRACES

COLUMNS = list(DTYPES)


def reference_columns(
    events: list[Any], base: int = 0
) -> tuple[dict[str, list[Any]], ColumnBuilder]:
    """The events by the reference rules."""
    cols = ColumnBuilder("batch")
    add = event_sink(cols)
    for k, event in enumerate(events):
        add(event, base + k)
    return {key: cols.column(key).tolist() for key in COLUMNS}, cols


def c_columns(text: bytes, base: int = 0) -> tuple[dict[str, list[Any]], ColumnBuilder, int, int]:
    """The C pass over `text`: its columns, symbols and flags, the events and bytes it took."""
    cols = ColumnBuilder("batch")
    count, taken, cols.ts_has_float, cols.ts_all_present, blocks = decode_events(
        text, base, cols.symbols
    )
    cols.add_blocks({key: np.frombuffer(data, dtype=DTYPES[key]) for key, data in blocks.items()})
    return {key: cols.column(key).tolist() for key in COLUMNS}, cols, count, taken


def same_columns(a: dict[str, list[Any]], b: dict[str, list[Any]]) -> bool:
    """Equal value for value, NaN where NaN, and -0.0 apart from 0.0 (bitwise for floats)."""

    def bits(values: list[Any]) -> list[Any]:
        return [struct.pack("<d", v) if isinstance(v, float) else v for v in values]

    return all(bits(a[key]) == bits(b[key]) for key in COLUMNS)


def assert_same_batch(text: bytes, base: int = 0) -> int:
    """The C pass gives the reference columns, symbol table and flags for the events it takes
    (of a JSON array); returns how many it took."""
    columns, cols, count, taken = c_columns(text, base)
    events = json.loads(text)[:count]
    if count:
        assert json.loads(text[:taken] + b"]") == events
    reference, reference_cols = reference_columns(events, base)
    assert same_columns(columns, reference)
    assert cols.symbols.names == reference_cols.symbols.names
    assert (cols.ts_has_float, cols.ts_all_present) == (
        reference_cols.ts_has_float,
        reference_cols.ts_all_present,
    )
    return count


@pytest.mark.parametrize(
    "trace_file",
    [f for d in ALL_TRACES for f in sorted(d.glob("*.gz"))],
    ids=lambda p: p.parent.name,
)
@pytest.mark.parametrize("chunk", [1 << 20, 5000])
def test_real_traces_give_the_reference_columns(
    trace_file: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_c = load_raw_trace(trace_file, chunk_size=chunk)
    monkeypatch.setattr(load_fast, "_decode_columns", take_nothing)
    without = load_raw_trace(trace_file, chunk_size=chunk)
    assert differences(with_c, without) == []
    assert with_c.metadata == without.metadata


KERNEL = (
    '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10.5, "dur": 2.6, '
    '"args": {"stream": 7, "correlation": 3, "External id": 9, "bytes": 64, '
    '"memory bandwidth (GB/s)": 1.5, "blocks per SM": 0.0125}}'
)


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        " [ ] ",
        "[" + KERNEL + "]",
        "[" + KERNEL + ", " + KERNEL.replace('"k"', '"k2"') + "]\n",
        '[{"cat": "Trace", "name": "t", "ts": 1, "dur": 2}, {"ph": "M", "name": "x"}]',
        '[{"name": "[memory]", "ts": 5, "args": {"Device Type": 1, "Device Id": 0, '
        '"Total Allocated": 7.5}}, {"name": "[memory]", "ts": 6, "args": {}}, '
        '{"name": "[memory]", "ts": 7}, {"name": "[memory]", "args": {}}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "args": {"blocks per SM": 80}}, '
        '{"cat": "c", "ts": 1, "dur": 1, "args": {"blocks per SM": -1e-3}}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "args": {"External id": null, "external id": 4}}, '
        '{"cat": "c", "ts": 1, "dur": 1, "args": {"external id": null}}]',
        '[{"cat": "c", "ts": null, "dur": 1}, {"cat": "c", "dur": 1}, {"cat": null, "ts": 1, '
        '"dur": 1}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "pid": -3, "tid": "9"}, '
        '{"cat": "c", "ts": 1, "dur": 1, "pid": "-3", "tid": 9}]',
        '[{"cat": "c", "ts": -0.0, "dur": -0, "x": [1e400, -1e-400, 123456789012345678901234]}]',
        '[{"cat": "c", "name": "é😀", "ts": 1, "dur": 2, "args": {"s": "\\u00e9\\ud83d\\ude00\\n"}}]',
        '[{"cat": "c", "ts": 9223372036854775807, "dur": -9223372036854775808}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "args": {"correlation": 9223372036854775807, '
        '"External id": -9223372036854775808}}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "deep": ' + "[" * 60 + "]" * 60 + "}]",
        # A lone surrogate is JSON that Python's json reads.
        '[{"cat": "c", "x": "\\ud800", "ts": 1, "dur": 1, "y": "\\udc00\\ud800\\u0041"}]',
    ],
)
def test_shapes_it_reads(text: str) -> None:
    assert assert_same_batch(text.encode()) == len(json.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        # Not strict JSON: the walk decides.
        "",
        "[",
        "[" + KERNEL,
        ",]",
        "[" + KERNEL + " x",
        '[{"cat": "c", "ts": 01, "dur": 1}]',
        '[{"cat": "c", "ts": 1., "dur": 1}]',
        '[{"cat": "c", "ts": NaN, "dur": 1}]',
        '[{"cat": "c\x01", "ts": 1, "dur": 1}]',
        '[{"cat": "c", "x": "\\q", "ts": 1, "dur": 1}]',
        '[{"cat": "c", "x": tru, "ts": 1, "dur": 1}]',
        '[{"cat": "c", "x": "\\u12G4", "ts": 1, "dur": 1}]',
        '[{"cat": "c" "ts": 1}]',
        '[{"cat": "c", "ts": 1, "dur": 1}}]',
        # JSON of shapes outside the strict ones: the reference rules decide.
        '[{"cat": "c", "ts": 1, "dur": 1, "args": null}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "args": {"stream": null}}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "args": {"stream": 7.0}}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "args": {"stream": "7"}}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "args": {"blocks per SM": null}}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "args": {"blocks per SM": "0.5"}}]',
        '[{"cat": "c", "ts": "1", "dur": 1}]',
        '[{"cat": "c", "ts": 1, "dur": true}]',
        '[{"cat": 5, "ts": 1, "dur": 1}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "pid": 1.5}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "pid": [1]}]',
        "[1]",
        "[[]]",
        # What the C pass leaves although the shape is fine: escapes in what it reads,
        # a key read twice, integers beyond int64, nesting deeper than it follows.
        '[{"cat": "c", "name": "a\\"b", "ts": 1, "dur": 1}]',
        '[{"c\\u0061t": "c", "ts": 1, "dur": 1}]',
        '[{"cat": "c", "cat": "d", "ts": 1, "dur": 1}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "args": {}, "args": {}}]',
        '[{"cat": "c", "ts": 9223372036854775808, "dur": 1}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "args": {"bytes": -9223372036854775809}}]',
        '[{"cat": "c", "ts": 1e400, "dur": 1}]',
        '[{"cat": "c", "ts": 1, "dur": 1, "deep": ' + "[" * 80 + "]" * 80 + "}]",
    ],
)
def test_what_it_leaves_to_the_reference_rules(text: str) -> None:
    symbols = SymbolTable()
    before = dict(symbols)
    assert decode_events(text.encode(), 0, symbols)[:2] == (0, 0)
    assert dict(symbols) == before  # nothing interned from an element it leaves


def test_it_takes_only_the_whole_events_of_a_cut_text() -> None:
    """A text cut anywhere (inside a string or an object) gives the events before the cut."""
    middle = '{"cat": "x},{", "ts": 1, "dur": 2}'
    text = ("[" + ", ".join([KERNEL, middle, KERNEL]) + "]").encode()
    assert assert_same_batch(text) == 3
    ends = [1 + len(KERNEL), 3 + len(KERNEL) + len(middle), len(text) - 1]
    for end in range(len(text)):
        count, taken = decode_events(text[:end], 0, SymbolTable())[:2]
        assert (count, taken) == next(
            ((k, at) for k, at in reversed(list(enumerate(ends, 1))) if at < end), (0, 0)
        ), end


_digits = st.text(alphabet="0123456789", min_size=1, max_size=24)


@st.composite
def number_literals(draw: st.DrawFn) -> str:
    """JSON number literals: integers, and floats with long mantissas and exponents, the forms
    Kineto writes (`1712195495519689.047`) and rarer ones."""
    sign = draw(st.sampled_from(["", "-"]))
    whole = draw(_digits).lstrip("0") or "0"
    fraction = draw(st.one_of(st.just(""), _digits.map(lambda d: "." + d)))
    exponent = draw(
        st.one_of(
            st.just(""),
            st.tuples(
                st.sampled_from("eE"), st.sampled_from(["", "+", "-"]), st.integers(0, 330)
            ).map(lambda e: f"{e[0]}{e[1]}{e[2]}"),
        )
    )
    return sign + whole + fraction + exponent


@settings(max_examples=300, deadline=None)
@given(literals=st.lists(number_literals(), min_size=1, max_size=40))
def test_numbers_are_read_as_pythons_json_reads_them(literals: list[str]) -> None:
    """Every literal as `ts` and `dur`: bit for bit the value of Python's json (or left to it)."""
    events = [f'{{"cat": "c", "ts": {lit}, "dur": {lit}}}' for lit in literals]
    count = assert_same_batch(("[" + ", ".join(events) + "]").encode())
    assert count == len(literals) or _out_of_range(literals[count])


def _out_of_range(literal: str) -> bool:
    value = json.loads(literal)
    return (isinstance(value, int) and not -(2**63) <= value < 2**63) or math.isinf(value)


def test_kinetos_timestamps_are_correctly_rounded() -> None:
    """19 significant digits over a power of ten (ns resolution), against CPython's dtoa."""
    rng = np.random.default_rng(19)
    literals = [
        f"{whole}.{frac:0{width}d}"
        for whole, frac, width in zip(
            rng.integers(10**14, 10**16, 3000).tolist(),
            rng.integers(0, 1000, 3000).tolist(),
            rng.integers(3, 6, 3000).tolist(),
            strict=True,
        )
    ]
    literals += ["9007199254740993.5", "18446744073709551.615", "1.0000000000000000001"]
    text = (
        "[" + ", ".join(f'{{"cat": "c", "ts": {x}, "dur": 0}}' for x in literals) + "]"
    ).encode()
    columns, _, count, _ = c_columns(text)
    assert count == len(literals)
    assert columns["ts"] == [float(x) for x in literals]


_name = st.one_of(
    st.sampled_from(["k", "aten::mm", "[memory]", "Trace", "ProfilerStep#1", "é😀"]),
    st.text(alphabet=st.sampled_from('ab},{[]": \\\n\té😀'), max_size=6),
)
_int = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_number = st.one_of(_int, st.floats(allow_nan=False, allow_infinity=False))
_any = st.one_of(st.none(), st.booleans(), _number, _name)
_event = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "i", "f"]),
        "cat": st.one_of(st.sampled_from(["kernel", "cpu_op", "Trace", "gpu_memcpy"]), _any),
        "name": st.one_of(_name, _any),
        "pid": st.one_of(st.integers(-3, 3), _name, _any),
        "tid": st.one_of(st.integers(-3, 3), _name),
        "ts": st.one_of(_number, st.none(), _name),
        "dur": st.one_of(st.integers(0, 10**6), st.floats(0, 1e6), st.none()),
        "args": st.one_of(
            st.none(),
            st.lists(_any, max_size=2),
            st.fixed_dictionaries(
                {},
                optional={
                    key: st.one_of(st.integers(-1, 9), _any)
                    for key in [
                        "stream",
                        "correlation",
                        "External id",
                        "external id",
                        "memory bandwidth (GB/s)",
                        "blocks per SM",
                        "bytes",
                        "Device Type",
                        "Device Id",
                        "Total Allocated",
                    ]
                }
                | {"nested": st.lists(st.dictionaries(_name, _any, max_size=2), max_size=2)},
            ),
        ),
    },
)


@settings(max_examples=400, deadline=None)
@given(
    events=st.lists(_event, max_size=25),
    indent=st.sampled_from([None, 0, 2]),
    ascii_only=st.booleans(),
    base=st.integers(0, 10**6),
)
def test_any_batch_gives_the_reference_columns(
    events: list[dict[str, Any]], indent: int | None, ascii_only: bool, base: int
) -> None:
    """Property: the C pass gives the reference columns and symbol table for the events it
    takes, and never takes an event the reference rules refuse."""
    assert_same_batch(json.dumps(events, indent=indent, ensure_ascii=ascii_only).encode(), base)
