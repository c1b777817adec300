"""Which automatic profiles may run now: the budget and the opt-outs (settings `autoprofile.*`).

A profile costs its GPUs x `profile_seconds` GPU-seconds. A request is refused when the job
opted out (job id, user or team in `opt_out`), when the job had an automatic profile less than
`job_interval_s` ago, when its team already had `team_profiles_per_day` in the last 24 h, or
when the fleet's GPU-seconds of the last 24 h plus this one would pass `gpu_seconds_per_day`.
Triggered requests (a finding) go before periodic ones, larger waste first. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from fleetscope.settings import Settings

__all__ = ["Budget", "Candidate", "Decision", "Past", "decide"]

DAY = timedelta(days=1)


@dataclass(frozen=True)
class Budget:
    gpu_seconds_per_day: float = 3600.0
    team_profiles_per_day: int = 20
    job_interval_s: float = 86400.0
    profile_seconds: float = 30.0
    opt_out: frozenset[str] = frozenset()

    @classmethod
    def from_settings(cls, settings: Settings) -> Budget:
        names = settings.autoprofile.opt_out.split(",")
        return cls(
            gpu_seconds_per_day=settings.autoprofile.gpu_seconds_per_day,
            team_profiles_per_day=settings.autoprofile.team_profiles_per_day,
            job_interval_s=settings.autoprofile.job_interval_s,
            profile_seconds=settings.autoprofile.profile_seconds,
            opt_out=frozenset(n.strip() for n in names if n.strip()),
        )


@dataclass(frozen=True)
class Candidate:
    """A job that should be profiled: for a finding (triggered) or because it is due (periodic)."""

    job_id: str
    gpus: int
    reason: str  # "triggered" | "periodic"
    user: str | None = None
    team: str | None = None
    finding_id: str | None = None
    rule_id: str | None = None
    wasted_gpu_hours: float = 0.0


@dataclass(frozen=True)
class Past:
    """An automatic profile already requested (from the catalog)."""

    job_id: str
    team: str | None
    gpu_seconds: float
    created: datetime


@dataclass(frozen=True)
class Decision:
    candidate: Candidate
    approved: bool
    why: str
    gpu_seconds: float


def decide(
    candidates: Sequence[Candidate], past: Sequence[Past], budget: Budget, now: datetime
) -> list[Decision]:
    """One decision per candidate, in the order they are considered; the approved ones count
    against the budget for the ones after them."""
    recent = [p for p in past if p.created > now - DAY]
    spent = sum(p.gpu_seconds for p in recent)
    per_team: dict[str | None, int] = {}
    for p in recent:
        per_team[p.team] = per_team.get(p.team, 0) + 1
    last_of_job = {p.job_id: p.created for p in sorted(past, key=lambda p: p.created)}
    order = sorted(
        candidates, key=lambda c: (c.reason != "triggered", -c.wasted_gpu_hours, c.job_id)
    )
    out: list[Decision] = []
    seen_jobs: set[str] = set()
    for c in order:
        cost = max(1, c.gpus) * budget.profile_seconds
        last = last_of_job.get(c.job_id)
        if budget.opt_out & {c.job_id, c.user or "", c.team or ""}:
            out.append(Decision(c, False, "opted out", cost))
        elif c.job_id in seen_jobs:
            out.append(Decision(c, False, "already profiled in this round", cost))
        elif last is not None and (now - last).total_seconds() < budget.job_interval_s:
            out.append(Decision(c, False, f"job profiled at {last:%Y-%m-%d %H:%M}", cost))
        elif per_team.get(c.team, 0) >= budget.team_profiles_per_day:
            out.append(Decision(c, False, f"team {c.team} at its daily limit", cost))
        elif spent + cost > budget.gpu_seconds_per_day:
            out.append(
                Decision(c, False, f"fleet budget: {spent:.0f} of "
                         f"{budget.gpu_seconds_per_day:.0f} GPU-s used today", cost)
            )  # fmt: skip
        else:
            spent += cost
            per_team[c.team] = per_team.get(c.team, 0) + 1
            seen_jobs.add(c.job_id)
            out.append(Decision(c, True, "within budget", cost))
    return out
