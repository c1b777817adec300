"""Scenarios and ground truths that rules carry themselves, so adding a rule edits no simulator
table: its module and one entry-point line are the whole change (issue 32).

A rule class (the object its `fleetscope.analyzers` entry point names, loaded through
fleetscope.plugins, the one loader) may carry `simulation`, a zero-argument callable returning a
`Simulation`:

- `scenarios`: jobs that make the rule fire (simulator.scenarios.Scenario), drawn by the fleet
  planner with the built-in ones (scenarios.SCENARIOS holds both);
- `rules`: per-job truths (simulator.truth.Rule, a predicate over a job's designed statistics),
  judged with the built-in ones (truth.RULES holds both);
- `fleet_rules`: truths that compare a job with others (a job against its team's median):
  `FleetRule.verdicts` gets every job of the truth's range and returns the ones it fires on.

The callable runs on first use, so a rule module imports the simulator only then (the analyzers
never need it). The truths must be written from the designed numbers, never by calling the
rule. The built-in rules' scenarios stay in scenarios.py and truth.py, where the shared levels
and conventions they are written against live. Must never read samples.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from simulator.scenarios import Scenario
    from simulator.truth import JobStats, Rule


@dataclass(frozen=True)
class SimulatedJob:
    """What a fleet truth knows of one job: its owner, hardware, scenario and designed stats."""

    job_id: str
    team: str
    gpu_model: str
    mig: bool
    scenario: Scenario
    stats: JobStats


@dataclass(frozen=True)
class FleetRule:
    rule_id: str
    verdicts: Callable[[Sequence[SimulatedJob]], dict[str, float]]  # job id -> wasted GPU-h
    how: str  # the predicate and the waste formula, in words, with the threshold's source


@dataclass(frozen=True)
class Simulation:
    scenarios: tuple[Scenario, ...] = ()
    rules: tuple[Rule, ...] = ()
    fleet_rules: tuple[FleetRule, ...] = ()


@functools.cache
def simulations() -> tuple[Simulation, ...]:
    """Every installed rule's `Simulation`, in plug-in order."""
    from fleetscope import plugins

    found = []
    for _name, rule in plugins.load_group(plugins.RULES):
        make = getattr(rule, "simulation", None)
        if callable(make):
            found.append(make())
    return tuple(found)
