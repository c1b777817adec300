"""Ground truth per user: R4, low efficiency per user, over an evaluation window.

What it is for: R4 is not a property of one job but of everything a user ran in the window, so
its truth is computed here, from the fleet's jobs and their designed timelines (timeline.py),
never from samples: each placement's GPU-hours inside [t0, t1) and its designed utilization over
that part (jobs crossing the window's edges count with the part inside, as the analyzer sees
them). Efficiency is the user's utilization weighted by GPU-hours (job_defense_shield: below 25 %
with more than 50 GPU-hours is reported, against a 50 % target). R4 wastes nothing of its own:
the per-job rules count the hours.

A user's verdict is kept only when unambiguous, as jobs' are (truth.ambiguous_rules): it must not
flip with the efficiency 5 % lower or higher or the GPU-hours 2 % lower or higher. The fleet
cannot be re-planned for a user, so an ambiguous user is reported as such and not scored.

Must never: read samples, or import the analyzers.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Final

from simulator.fleet import Fleet
from simulator.timeline import mean_between

__all__ = ["MAX_EFFICIENCY_PCT", "MIN_GPU_HOURS", "UserStats", "user_stats", "user_truth_records"]

MAX_EFFICIENCY_PCT: Final = 25.0  # job_defense_shield: users below 25 % are reported
MIN_GPU_HOURS: Final = 50.0  # job_defense_shield: with more than 50 GPU-hours in the window


@dataclass(frozen=True)
class UserStats:
    user: str
    team: str
    jobs: tuple[str, ...]
    gpu_hours: float
    efficiency_pct: float


def user_stats(fleet: Fleet, t0: float, t1: float) -> list[UserStats]:
    """Every user with GPU time in [t0, t1), from their jobs' designed utilization."""
    hours: dict[str, float] = defaultdict(float)
    util_hours: dict[str, float] = defaultdict(float)
    jobs: dict[str, list[str]] = defaultdict(list)
    teams: dict[str, str] = {}
    for job in fleet.jobs:
        wall_s = job.end_s - job.start_s
        offset = 0  # ranks run across the hosts of a job; a moved job restarts at 0 (signals.py)
        for placement in job.placements:
            ranks = range(offset, offset + len(placement.units))
            offset = 0 if job.scenario.moves else offset + len(placement.units)
            x, y = max(placement.start_s, t0), min(placement.end_s, t1)
            if y <= x:
                continue
            a, b = x - job.start_s, y - job.start_s
            for rank in ranks:
                util = mean_between(job.scenario, wall_s, rank, a, b, "util_pct")
                hours[job.user] += (b - a) / 3600.0
                util_hours[job.user] += util * (b - a) / 3600.0
            if job.job_id not in jobs[job.user]:
                jobs[job.user].append(job.job_id)
            teams.setdefault(job.user, job.team)
    return [
        UserStats(user, teams[user], tuple(jobs[user]), hours[user], util_hours[user] / hours[user])
        for user in sorted(hours)
        if hours[user] > 0
    ]


def _fires(gpu_hours: float, efficiency_pct: float) -> bool:
    return gpu_hours > MIN_GPU_HOURS and efficiency_pct < MAX_EFFICIENCY_PCT


def user_truth_records(fleet: Fleet, t0: float, t1: float) -> list[dict[str, Any]]:
    """Per user: GPU-hours, efficiency, whether R4 should fire, and whether that is unambiguous."""
    records = []
    for s in user_stats(fleet, t0, t1):
        nominal = _fires(s.gpu_hours, s.efficiency_pct)
        flips = any(
            _fires(s.gpu_hours * h, s.efficiency_pct * e) != nominal
            for h in (0.98, 1.02)
            for e in (0.95, 1.05)
        )
        records.append(
            {
                "user": s.user,
                "team": s.team,
                "jobs": list(s.jobs),
                "gpu_hours": round(s.gpu_hours, 6),
                "efficiency_pct": round(s.efficiency_pct, 4),
                "rules": ["R4"] if nominal else [],
                "ambiguous": flips,
                "how": (
                    f"GPU-hour-weighted utilization < {MAX_EFFICIENCY_PCT:g} % with > "
                    f"{MIN_GPU_HOURS:g} GPU-h in the window (job_defense_shield); waste: not "
                    "counted (the per-job rules carry it)"
                ),
            }
        )
    return records
