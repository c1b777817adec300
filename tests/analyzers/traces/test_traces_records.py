"""The trace records whose `__init__` and `__repr__` are written out (issue 19: generating them
cost ~1 ms a command each) behave as the ones @dataclass generates: same parameters, defaults
and default factories, same attributes after construction, same repr."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import numpy as np
import pytest

from analyzers.traces.analyses.base import AnalysisResult
from analyzers.traces.frame import Mode, RankFrame, TraceSet
from analyzers.traces.load import RawTrace

WRITTEN_OUT = [RankFrame, TraceSet, RawTrace, AnalysisResult]


def _generated(cls: type) -> type:
    """A dataclass of the same fields with every method @dataclass generates."""
    specs = []
    for f in dataclasses.fields(cls):
        copy = dataclasses.field(
            default=f.default, default_factory=f.default_factory, repr=f.repr, compare=f.compare
        )
        specs.append((f.name, f.type, copy))
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    return dataclasses.make_dataclass(cls.__name__, specs, eq=params.eq, frozen=params.frozen)


def _required_args(cls: type) -> dict[str, Any]:
    """A distinct object for every field without a default."""
    return {
        f.name: np.arange(i + 1)
        for i, f in enumerate(dataclasses.fields(cls))
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }


@pytest.mark.parametrize("cls", WRITTEN_OUT, ids=lambda c: c.__name__)
def test_the_signature_is_the_generated_one(cls: type) -> None:
    ours = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    theirs = inspect.signature(_generated(cls).__init__).parameters  # type: ignore[misc]
    assert [(p.name, p.kind) for p in ours.values()] == [(p.name, p.kind) for p in theirs.values()]
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    for name, param in list(ours.items())[1:]:
        spec = by_name[name]
        if spec.default is not dataclasses.MISSING:
            assert param.default == spec.default == theirs[name].default
        else:
            assert (param.default is inspect.Parameter.empty) == (
                theirs[name].default is inspect.Parameter.empty
            )


@pytest.mark.parametrize("cls", WRITTEN_OUT, ids=lambda c: c.__name__)
def test_construction_and_repr_are_the_generated_ones(cls: type) -> None:
    args = _required_args(cls)
    ours, theirs = cls(**args), _generated(cls)(**args)
    assert vars(ours).keys() == vars(theirs).keys()
    for name, value in vars(theirs).items():
        mine = vars(ours)[name]
        if name in args:
            assert mine is value
        else:  # a default or a default factory's fresh value
            assert type(mine) is type(value)
            assert repr(mine) == repr(value)
    assert repr(ours) == repr(theirs)
    # Positionally too, every field given.
    every = [np.arange(i + 2) for i, _ in enumerate(dataclasses.fields(cls))]
    ours, theirs = cls(*every), _generated(cls)(*every)
    assert all(vars(ours)[k] is v for k, v in vars(theirs).items())
    assert repr(ours) == repr(theirs)


def test_factories_give_fresh_values() -> None:
    a = TraceSet(Mode.HTA, {}, None)  # type: ignore[arg-type]
    b = TraceSet(Mode.HTA, {}, None)  # type: ignore[arg-type]
    assert a.notes == [] and a.notes is not b.notes
