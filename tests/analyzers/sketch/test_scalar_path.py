"""The two scalar paths of `QuantileSketch.add(float)`: the C extension and the pure-Python
fallback give bit-identical sketches for any mix of calls; an infinity is refused by the call that
adds it and changes nothing; buffered scalars survive copies and pickling; CI runs the C path."""

from __future__ import annotations

import copy
import math
import os
import pickle
import re
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import analyzers.sketch.core as sketch_module
from analyzers.sketch import scalar as sketch_scalar
from fleetscope.errors import SketchError

from .scalar_paths import python_path_module

PATHS = ["c", "python"]


@pytest.fixture(autouse=True)
def scalar_path() -> str:
    """Overrides the directory's two-path fixture: these specifications name both paths."""
    return "both"


def path_module(path: str) -> ModuleType:
    if path == "python":
        return python_path_module()
    if sketch_module.SCALAR_PATH != "c":
        pytest.skip("the C extension analyzers/sketch/_sketch_scalar.c is not built here")
    return sketch_module


def test_ci_runs_the_c_path() -> None:
    if os.environ.get("CI"):
        assert sketch_module.SCALAR_PATH == "c", (
            "CI must build analyzers/sketch/_sketch_scalar.c (gcc and the Python headers: .ci/run)"
        )
    assert sketch_module.SCALAR_PATH in {"c", "python"}


def test_each_path_has_its_own_base_and_the_same_buffer_size() -> None:
    c_module = path_module("c")
    from analyzers.sketch import _sketch_scalar

    assert c_module.QuantileSketch.__mro__[1] is _sketch_scalar.ScalarBuffer
    assert python_path_module().QuantileSketch.__mro__[1] is sketch_scalar.ScalarBuffer
    assert _sketch_scalar.SCALAR_BUFFER == sketch_scalar.SCALAR_BUFFER == 4096


finite = st.floats(allow_nan=False, allow_infinity=False)  # -0.0, subnormals and huge included
operations = st.lists(
    st.one_of(
        st.tuples(st.just("scalar"), finite),
        # Many scalars at once (seed, how many), so calls cross SCALAR_BUFFER boundaries.
        st.tuples(st.just("scalars"), st.integers(0, 2**32 - 1), st.integers(1, 9_000)),
        st.tuples(st.just("scalar"), st.sampled_from([math.nan, -math.nan, math.inf, -math.inf])),
        st.tuples(st.just("scalar"), st.integers(-300, 300) | st.integers(-(2**1100), 2**1100)),
        st.tuples(st.just("scalar"), finite.map(np.float64) | st.booleans() | st.just("95")),
        st.tuples(st.just("array"), st.lists(st.floats(allow_infinity=False), max_size=20)),
        st.tuples(st.just("merge"), st.lists(finite, max_size=30)),  # of a sketch fed scalars
        st.tuples(st.just("copy")),
        st.tuples(st.just("count")),  # a read, which flushes
    ),
    max_size=12,
)


def run(module: ModuleType, ops: list[tuple[Any, ...]]) -> tuple[object, ...]:
    """Apply `ops` to a fresh sketch; what each call did (its error, the scalars left buffered)
    and the final blob."""
    sketch = module.QuantileSketch(top_k=8)
    seen: list[object] = []
    for op, *args in ops:
        try:
            if op == "scalar":
                sketch.add(args[0])
            elif op == "scalars":
                rng = np.random.default_rng(args[0])
                values = rng.standard_normal(args[1]) * 10.0 ** rng.integers(-5, 5, args[1])
                add = sketch.add
                for value in values.tolist():
                    add(value)
            elif op == "array":
                sketch.add(np.array(args[0], dtype=np.float64))
            elif op == "merge":
                other = module.QuantileSketch(top_k=8)
                for value in args[0]:
                    other.add(value)
                sketch.merge(other)
            elif op == "copy":
                sketch = sketch.copy()
            else:
                seen.append(sketch.count)
        except SketchError as exc:
            seen.append(str(exc))
        seen.append(sketch._scalar_count)
    return (*seen, sketch.to_bytes())


@settings(max_examples=200, deadline=None)
@given(operations)
def test_the_c_path_and_the_python_fallback_give_bit_identical_sketches(
    ops: list[tuple[Any, ...]],
) -> None:
    assert run(path_module("c"), ops) == run(path_module("python"), ops)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("bad", [math.inf, -math.inf, np.float64(math.inf)])
def test_an_infinity_added_as_a_scalar_is_refused_and_changes_nothing(
    path: str, bad: float
) -> None:
    cls = path_module(path).QuantileSketch
    sketch, twin = cls(), cls()
    for each in (sketch, twin):
        each.add(np.array([5.0, -6.0]))
        each.add(1.25)  # buffered scalars, flushed when the infinity comes
        each.add(3)
    message = (
        f"cannot add {float(bad)!r} (at index 0): a quantile sketch takes finite values "
        "(NaN is counted and ignored); nothing of this call was added"
    )
    with pytest.raises(SketchError, match=re.escape(message)):
        sketch.add(bad)
    assert sketch.to_bytes() == twin.to_bytes()
    assert (sketch.count, sketch.sum) == (4, 3.25)


@pytest.mark.parametrize("path", PATHS)
def test_scalars_are_ingested_every_scalar_buffer_values(path: str) -> None:
    sketch = path_module(path).QuantileSketch()
    for value in range(4095):
        sketch.add(float(value))
    assert sketch._scalar_count == 4095
    sketch.add(0.5)  # the 4096th: one vectorized ingest
    assert sketch._scalar_count == 0
    sketch.add(2.0)
    sketch.add(math.nan)  # anything but a finite float flushes first, as before
    assert sketch._scalar_count == 0
    assert (sketch.count, sketch.nan_count, sketch.max) == (4097, 1, 4094.0)


@pytest.mark.parametrize("path", PATHS)
def test_buffered_scalars_survive_pickling_copies_and_new(path: str) -> None:
    cls = path_module(path).QuantileSketch
    sketch = cls(top_k=4)
    sketch.add(np.array([1.0, 2.0]))
    for value in (0.5, -3.25, 7):
        sketch.add(value)
    state = sketch.__getstate__()
    # The layout of a plain slotted object, as pickles made before the C buffer have.
    assert state[0] is None and state[1]["_scalars"] == [0.5, -3.25, 7.0]
    assert set(state[1]) == {*sketch_module.QuantileSketch.__slots__, "_scalars"}
    restored = pickle.loads(pickle.dumps(sketch))
    deep = copy.deepcopy(sketch)
    assert restored._scalar_count == deep._scalar_count == sketch._scalar_count == 3
    for each in (sketch, restored, deep):
        each.add(2.5)
    assert restored.to_bytes() == deep.to_bytes() == sketch.to_bytes()
    # copy() and from_bytes build through __new__, which sets up an empty buffer.
    assert cls.__new__(cls)._scalar_count == 0
    copied, decoded = sketch.copy(), cls.from_bytes(sketch.to_bytes())
    for each in (sketch, copied, decoded):
        each.add(9.75)
    assert copied.to_bytes() == decoded.to_bytes() == sketch.to_bytes()


@pytest.mark.parametrize("path", PATHS)
def test_add_takes_its_value_by_keyword_too(path: str) -> None:
    sketch = path_module(path).QuantileSketch()
    sketch.add(values=1.5)
    sketch.add(values=[2.0, 3.0])
    assert (sketch.count, sketch.sum) == (3, 6.5)
