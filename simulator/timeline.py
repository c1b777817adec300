"""A job's designed timeline: which level each rank runs at over any stretch of its run.

What it is for: truth that depends on *when* something happens, not only on how much of the job
it takes: the window means of GPU memory that R13 compares (a leak grows steadily, a checkpoint
load is one jump), and a job's utilization over the part of it inside an evaluation window (R4
pools a user's jobs over the window, including jobs that cross its edges). Times are seconds from
the job's start, on the wall clock the signals use (signals.py: lead phase, main phase with its
alternation, tail).

Random blocks count at their designed share (signals.py stratifies them so every 20 blocks hold
exactly that share); periodic alternations and the memory creep are integrated exactly.

Must never: read samples, or use randomness.
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.levels import CRASHED, Level
from simulator.scenarios import Periodic, RandomBlocks, Scenario

__all__ = ["Span", "mean_between", "spans", "window_means"]


@dataclass(frozen=True)
class Span:
    """`seconds` of one rank at `level`; `creep` is the mean share of the memory creep reached."""

    seconds: float
    level: Level
    creep: float = 0.0


def _overlap(a: float, b: float, lo: float, hi: float) -> tuple[float, float] | None:
    x, y = max(a, lo), min(b, hi)
    return (x, y) if y > x else None


def _periodic_alt_s(alt: Periodic, u: float) -> float:
    """Seconds spent in the alternate level during the first `u` seconds of the main phase."""
    if u <= 0:
        return 0.0
    full, rest = divmod(u, alt.period_s)
    return full * alt.alt_s + max(0.0, rest - (alt.period_s - alt.alt_s))


def spans(
    scenario: Scenario,
    duration_s: float,
    rank: int,
    a: float,
    b: float,
    *,
    time_shift_s: float = 0.0,
    share_shift: float = 0.0,
) -> list[Span]:
    """The levels rank `rank` runs at during [a, b) of a `duration_s` job, with their seconds.

    `time_shift_s` moves the phase boundaries (lead, tail) and `share_shift` the random-block
    share, as truth.ambiguous_rules perturbs them.
    """
    sc = scenario
    lead = min(max(sc.lead_s + time_shift_s, 0.0), duration_s) if sc.lead_s else 0.0
    tail = min(max(sc.tail_s + time_shift_s, 0.0), duration_s - lead) if sc.tail_s else 0.0
    main_end = duration_s - tail
    main_level = sc.odd_rank if (sc.odd_rank is not None and rank == 0) else sc.main
    out: list[Span] = []
    if (o := _overlap(a, b, 0.0, lead)) is not None:
        out.append(Span(o[1] - o[0], sc.lead))
    if (o := _overlap(a, b, main_end, duration_s)) is not None:
        out.append(Span(o[1] - o[0], CRASHED))
    if (o := _overlap(a, b, lead, main_end)) is None:
        return out
    x, y = o
    seconds = y - x
    main_len = main_end - lead
    creep = ((x + y) / 2 - lead) / main_len if sc.creep is not None and main_len > 0 else 0.0
    alt = sc.alternation
    alt_s = 0.0
    if isinstance(alt, RandomBlocks):
        alt_s = seconds * min(max(alt.share + share_shift, 0.0), 1.0)
    elif isinstance(alt, Periodic):
        alt_s = _periodic_alt_s(alt, y - lead) - _periodic_alt_s(alt, x - lead)
    if seconds - alt_s > 0:
        out.append(Span(seconds - alt_s, main_level, creep))
    if alt is not None and alt_s > 0:
        out.append(Span(alt_s, alt.level, creep))
    return out


def mean_between(
    scenario: Scenario, duration_s: float, rank: int, a: float, b: float, attr: str
) -> float:
    """Time-weighted mean of a Level attribute for one rank over [a, b) (fb_frac with creep)."""
    parts = spans(scenario, duration_s, rank, a, b)
    total = sum(p.seconds for p in parts)
    if total <= 0:
        return 0.0
    return sum(p.seconds * _value(scenario, p, attr) for p in parts) / total


def window_means(
    scenario: Scenario,
    duration_s: float,
    rank: int,
    attr: str,
    windows: int,
    *,
    level_scale: float = 1.0,
    time_shift_s: float = 0.0,
    share_shift: float = 0.0,
) -> tuple[float, ...]:
    """Means of `attr` over `windows` equal windows of the job, as R13 cuts a GPU's samples."""
    width = duration_s / windows
    means = []
    for i in range(windows):
        parts = spans(
            scenario,
            duration_s,
            rank,
            i * width,
            (i + 1) * width,
            time_shift_s=time_shift_s,
            share_shift=share_shift,
        )
        total = sum(p.seconds for p in parts) or 1.0
        means.append(
            sum(p.seconds * _value(scenario, p, attr) for p in parts) * level_scale / total
        )
    return tuple(means)


def _value(scenario: Scenario, span: Span, attr: str) -> float:
    value = float(getattr(span.level, attr))
    if attr == "fb_frac" and scenario.creep is not None:
        value += scenario.creep.growth_frac * span.creep
    return value
