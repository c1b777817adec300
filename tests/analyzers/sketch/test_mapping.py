"""The bucket mapping: each value lies in its key's bucket (L, U], and each bucket's representative
is within 2**-m of everything in it; integer edges come back as themselves."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from analyzers.sketch.mapping import LogLinearMapping, mantissa_bits_for


@settings(max_examples=500, deadline=None)
@given(st.floats(min_value=5e-324, max_value=1.7976931348623157e308), st.integers(1, 12))
def test_every_value_lies_in_its_bucket_and_near_its_representative(value: float, m: int) -> None:
    mapping = LogLinearMapping(m)
    keys = mapping.keys(np.array([value]))
    lower, upper = mapping.bounds(keys)
    assert lower[0] < value <= upper[0] or (value < 2.3e-308 and lower[0] <= value <= upper[0])
    rep = mapping.values(keys)[0]
    assert abs(rep - value) <= 2.0**-m * value * (1 + 1e-12) + 5e-324


def test_integers_up_to_two_to_the_m_plus_one_are_their_own_representative() -> None:
    mapping = LogLinearMapping(7)
    ints = np.arange(1, 257, dtype=np.float64)
    np.testing.assert_array_equal(mapping.values(mapping.keys(ints)), ints)


def test_accuracy_to_mantissa_bits() -> None:
    assert [mantissa_bits_for(a) for a in (0.01, 2**-7, 0.02, 0.05, 0.001)] == [7, 7, 6, 5, 10]


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=5e-324, max_value=1.7976931348623157e308), st.integers(1, 12))
def test_the_scalar_and_vector_representatives_agree_bit_for_bit(value: float, m: int) -> None:
    mapping = LogLinearMapping(m)
    key = int(mapping.keys(np.array([value]))[0])
    assert mapping.value(key) == float(mapping.values(np.array([key]))[0])
