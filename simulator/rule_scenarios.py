"""Scenarios and ground truths that rules carry themselves, so adding a rule edits no simulator
table: its module and one entry-point line are the whole change (issue 32).

A rule class (the object its `fleetscope.analyzers` entry point names, loaded through
fleetscope.plugins, the one loader) may carry `simulation`, plain data (the analyzers never
import the simulator, tests/test_layering.py):

- `scenarios`: a sequence of mappings, each `simulator.scenarios.Scenario`'s fields with `main`
  named by its level's name (`"busy"`: simulator.levels) and `steps` a mapping of
  `StepProfile` fields; drawn by the fleet planner with the built-in scenarios (SCENARIOS holds
  both);
- `rules`: per-job truths, mappings of `rule_id`, `fires` and `waste` (callables over a job's
  designed `simulator.truth.JobStats`) and `how`, judged with the built-in ones (truth.RULES
  holds both);
- `fleet_rules`: mappings of `rule_id`, `how` (the predicate and waste formula in words) and
  `verdicts`, a callable that gets every job of the truth's range as `SimulatedJob`s and
  returns {job id: wasted GPU-hours} for those it fires on: truths that compare a job with
  others (a job against its team's median), written from the designed numbers, never by
  calling the rule.

The built-in rules' scenarios and truths stay in scenarios.py and truth.py, beside the levels and
conventions they are written against. Must never read samples.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class SimulatedJob:
    """What a fleet truth knows of one job: owner, hardware, scenario and designed figures."""

    job_id: str
    team: str
    gpu_model: str
    mig: bool
    scenario: str
    mfu: float | None  # the designed MFU where its script reports FLOPs (StepProfile.mfu)
    training_gpu_hours: float  # GPU-hours in training phases (the designed timeline)


@dataclass(frozen=True)
class FleetRule:
    rule_id: str
    verdicts: Callable[[Sequence[SimulatedJob]], dict[str, float]]  # job id -> wasted GPU-h
    how: str


def fleet_rules() -> tuple[FleetRule, ...]:
    """Every installed rule's fleet truths, in plug-in order."""
    return tuple(
        FleetRule(str(r["rule_id"]), r["verdicts"], str(r["how"]))
        for data in simulations()
        for r in data.get("fleet_rules", ())
    )


@functools.cache
def simulations() -> tuple[Mapping[str, Any], ...]:
    """Every installed rule's `simulation` data, in plug-in order (scenarios.py and truth.py
    turn theirs into their own objects)."""
    from fleetscope import plugins

    found = []
    for _name, rule in plugins.load_group(plugins.RULES):
        data = getattr(rule, "simulation", None)
        if isinstance(data, Mapping):
            found.append(data)
    return tuple(found)


class WithRules(Mapping[K, V], Generic[K, V]):
    """Built-in entries, then those the installed rules' simulations add (`extra`), read on
    first use: rule modules load after the simulator's own."""

    def __init__(
        self, builtin: Mapping[K, V], extra: Callable[[Mapping[str, Any]], Iterable[tuple[K, V]]]
    ) -> None:
        self._builtin = dict(builtin)
        self._extra = extra

    @functools.cached_property
    def _all(self) -> dict[K, V]:
        from fleetscope.errors import ConfigError

        merged = dict(self._builtin)
        for simulation in simulations():
            for key, value in self._extra(simulation):
                if key in merged:
                    raise ConfigError(f"two simulator entries named {key!r}")
                merged[key] = value
        return merged

    def __getitem__(self, key: K) -> V:
        return self._all[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)
