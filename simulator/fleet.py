"""The simulated fleet: hosts, their GPUs (or MIG slices), and a deterministic job schedule.

What it is for: given a seed and a time range, say which job holds which GPU when, with the
metadata a scheduler knows (user, team, job name, model). Everything else (metric values, pages,
tables, truth records) is computed from a `Fleet`.

How jobs are placed: hosts are grouped in lanes (two hosts of the same scheduler, or one MIG
host). Each lane runs back-to-back plans of 2-12 hours; a plan is a layout from LAYOUTS (one
16-GPU job over both hosts, independent splits of each host into 8/4/2/1-GPU jobs with some GPUs
left free, a job that moves from one host to the other, an 8-GPU job fragmented over half of each
host, or one job per MIG slice). Each job in a plan draws a scenario (weighted, among those that
fit its GPU count and placement) and a duration; a job whose truth would be ambiguous
(truth.ambiguous_rules) gets another duration, then becomes healthy. Jobs never straddle plans, so
a GPU is free between them.

Who runs what: a job's team and user are drawn at random, except for HABITS: a user who runs
most of the fleet's jobs of a few scenarios and nothing else (the researcher who keeps notebooks
and idle allocations open, the engineer who runs a team's small inference services on whole
GPUs), so that a user's efficiency over many jobs (R4) is low for a reason a fleet really has;
the truth (users.py) computes every user's efficiency from their jobs alike.

Job ids follow the agent's convention: Slurm jobs are numeric strings (the `hpc_job` label);
Kubernetes jobs are "<namespace>/<name>", their pods "<name>-0" (one host) or "<name>-master-0",
"<name>-worker-<n>" (PyTorchJob over several hosts). Namespaces are team names.

Set aside from the plan (FleetSpec): an attached job on host 0's last GPU (a real process shown
on a simulated GPU) and a showcase job on its first (a named scenario running all along, whatever
the seed: the demo's findings in its first minute); the plan is drawn as without them, less the
jobs that would have used their GPUs.

Must never: compute metric values, or read the clock (times are always passed in).
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from simulator.hardware import MIG_LAYOUT
from simulator.model import (
    HABITS,
    MODELS,
    PURPOSES,
    TEAMS,
    WARMUP_S,
    FleetSpec,
    Habit,
    Host,
    Job,
    Placement,
    Unit,
    _hosts,
    _units,
    stable_seed,
)
from simulator.scenarios import ATTACHED, SCENARIOS, Scenario
from simulator.truth import JobShape, ambiguous_rules

__all__ = [
    "HABITS",
    "Fleet",
    "FleetSpec",
    "Habit",
    "Host",
    "Job",
    "Placement",
    "Unit",
    "stable_seed",
]


@dataclass
class _Draft:
    scenario: Scenario
    placements: list[tuple[int, tuple[int, ...], int, int]]  # host, units, start, end


@dataclass(frozen=True)
class _Lane:
    hosts: tuple[Host, ...]
    units: tuple[tuple[int, ...], ...]  # per host, its unit indices


class _Planner:
    """Fills lanes with plans; one instance per fleet, one RNG per lane."""

    def __init__(self, spec: FleetSpec) -> None:
        self.spec = spec

    def scenario_for(
        self, rng: random.Random, n_gpus: int, mig: bool, moves: bool
    ) -> list[Scenario]:
        fits = [
            s
            for s in SCENARIOS.values()
            if s.min_gpus <= n_gpus and (s.mig_ok or not mig) and s.moves == moves
        ]
        first = rng.choices(fits, weights=[s.weight for s in fits])[0]
        return [first, SCENARIOS["healthy"]]

    def job(
        self,
        rng: random.Random,
        lane: _Lane,
        pieces: list[tuple[int, tuple[int, ...]]],
        start: int,
        latest_end: int,
        moves: bool = False,
    ) -> _Draft | None:
        """One job on `pieces` (host, units) starting at `start`, ending by `latest_end`."""
        host = lane.hosts[0]
        per_host = {h for h, _ in pieces}
        n_gpus = len(pieces[0][1]) if moves else sum(len(u) for _, u in pieces)
        room_min = (latest_end - start) // 60
        for scenario in self.scenario_for(rng, n_gpus, host.mig, moves):
            shortest = _min_duration_min(scenario)
            if room_min < shortest:
                continue
            if scenario.long_running:  # a service runs until its reservation ends
                shortest = max(shortest, (room_min * 3 // 4) // 10 * 10)
            choices = list(range(shortest, room_min + 1, 10))
            rng.shuffle(choices)
            for minutes in choices[:8]:
                shape = JobShape(
                    scenario=scenario,
                    n_gpus=n_gpus,
                    duration_s=minutes * 60 - (120 if moves else 0),
                    fb_total_mib=_fb_total(lane),
                    compute_capability=host.model.compute_capability,
                    max_nodes=1 if moves else len(per_host),
                    sm_clock_max_mhz=host.model.sm_clock_max_mhz,
                    mig=host.mig,
                )
                if ambiguous_rules(shape):
                    continue
                end = start + minutes * 60
                if moves:
                    middle = start + (minutes * 60) // 2
                    (h0, u0), (h1, u1) = pieces
                    return _Draft(scenario, [(h0, u0, start, middle), (h1, u1, middle + 120, end)])
                return _Draft(scenario, [(h, u, start, end) for h, u in pieces])
        return None


def _min_duration_min(scenario: Scenario) -> int:
    need = 30 * 60 + 2 * scenario.lead_s
    if scenario.xid is not None:
        need = max(need, scenario.xid.replay_lead_s + scenario.xid.tail_s + 600)
    return math.ceil(need / 600) * 10


def _fb_total(lane: _Lane) -> int:
    host = lane.hosts[0]
    return MIG_LAYOUT[0].fb_total_mib if host.mig else host.model.fb_total_mib


Layout = Callable[[_Planner, random.Random, _Lane, int, int], list[_Draft]]

_HOST_SPLITS: Final[tuple[tuple[tuple[int, ...], float], ...]] = (
    ((8,), 3.0),
    ((4, 4), 2.0),
    ((4, 2, 1), 1.0),
    ((2, 2, 2), 1.0),
    ((1, 1, 1, 1), 1.0),
    ((), 0.5),
)


def _stagger(rng: random.Random, start: int) -> int:
    return start + rng.randrange(0, 300)


def _split_host(
    planner: _Planner, rng: random.Random, lane: _Lane, which: int, start: int, end: int
) -> list[_Draft]:
    host = lane.hosts[which].index
    units = lane.units[which]
    split = rng.choices([s for s, _ in _HOST_SPLITS], weights=[w for _, w in _HOST_SPLITS])[0]
    drafts: list[_Draft] = []
    offset = 0
    for size in split:
        chosen = units[offset : offset + size]
        offset += size
        draft = planner.job(rng, lane, [(host, chosen)], _stagger(rng, start), end)
        if draft:
            drafts.append(draft)
    return drafts


def _independent(
    planner: _Planner, rng: random.Random, lane: _Lane, start: int, end: int
) -> list[_Draft]:
    drafts: list[_Draft] = []
    for which in range(len(lane.hosts)):
        drafts.extend(_split_host(planner, rng, lane, which, start, end))
    return drafts


def _multi_node(
    planner: _Planner, rng: random.Random, lane: _Lane, start: int, end: int
) -> list[_Draft]:
    pieces = [(h.index, u) for h, u in zip(lane.hosts, lane.units, strict=True)]
    draft = planner.job(rng, lane, pieces, _stagger(rng, start), end)
    return [draft] if draft else []


def _move(planner: _Planner, rng: random.Random, lane: _Lane, start: int, end: int) -> list[_Draft]:
    (a, b), (ua, ub) = lane.hosts, lane.units
    moved = planner.job(
        rng, lane, [(a.index, ua[:4]), (b.index, ub[4:])], _stagger(rng, start), end, moves=True
    )
    drafts = [moved] if moved else []
    for host, units in ((a, ua[4:]), (b, ub[:4])):
        draft = planner.job(rng, lane, [(host.index, units)], _stagger(rng, start), end)
        if draft:
            drafts.append(draft)
    return drafts


def _fragmented(
    planner: _Planner, rng: random.Random, lane: _Lane, start: int, end: int
) -> list[_Draft]:
    """An 8-GPU job on 4 GPUs of each host (one node would do: R15), others on the rest."""
    (a, b), (ua, ub) = lane.hosts, lane.units
    split = planner.job(
        rng, lane, [(a.index, ua[:4]), (b.index, ub[:4])], _stagger(rng, start), end
    )
    drafts = [split] if split else []
    for host, units in ((a, ua[4:]), (b, ub[4:])):
        draft = planner.job(rng, lane, [(host.index, units)], _stagger(rng, start), end)
        if draft:
            drafts.append(draft)
    return drafts


def _mig_slices(
    planner: _Planner, rng: random.Random, lane: _Lane, start: int, end: int
) -> list[_Draft]:
    drafts: list[_Draft] = []
    for unit in lane.units[0]:
        if rng.random() < 0.25:
            continue
        draft = planner.job(rng, lane, [(lane.hosts[0].index, (unit,))], _stagger(rng, start), end)
        if draft:
            drafts.append(draft)
    return drafts


def _single_host(
    planner: _Planner, rng: random.Random, lane: _Lane, start: int, end: int
) -> list[_Draft]:
    return _split_host(planner, rng, lane, 0, start, end)


# Layout registry: (name, weight, applies to lane) -> the jobs of one plan.
LAYOUTS: Final[tuple[tuple[str, float, Callable[[_Lane], bool], Layout], ...]] = (
    ("independent", 5.0, lambda lane: len(lane.hosts) == 2, _independent),
    ("multi_node", 1.5, lambda lane: len(lane.hosts) == 2, _multi_node),
    ("move", 1.0, lambda lane: len(lane.hosts) == 2, _move),
    ("fragmented", 1.0, lambda lane: len(lane.hosts) == 2, _fragmented),
    ("single_host", 1.0, lambda lane: len(lane.hosts) == 1 and not lane.hosts[0].mig, _single_host),
    ("mig_slices", 1.0, lambda lane: lane.hosts[0].mig, _mig_slices),
)
PLAN_HOURS: Final = (2, 3, 4, 5, 6, 8, 10, 12)


def _lanes(hosts: Sequence[Host], units: Sequence[Unit]) -> list[_Lane]:
    by_host: dict[int, tuple[int, ...]] = {}
    for unit in units:
        by_host[unit.host] = (*by_host.get(unit.host, ()), unit.index)
    lanes: list[_Lane] = []
    i = 0
    while i < len(hosts):
        a = hosts[i]
        b = hosts[i + 1] if i + 1 < len(hosts) else None
        if b is not None and not a.mig and not b.mig and a.scheduler == b.scheduler:
            lanes.append(_Lane((a, b), (by_host[a.index], by_host[b.index])))
            i += 2
        else:
            lanes.append(_Lane((a,), (by_host[a.index],)))
            i += 1
    return lanes


class Fleet:
    """Hosts, units and every job overlapping [origin_s - WARMUP_S, origin_s + horizon_s)."""

    def __init__(self, spec: FleetSpec, origin_s: int, horizon_s: int) -> None:
        if spec.hosts < 1:
            from fleetscope.errors import ConfigError

            raise ConfigError(f"a fleet needs at least one host, got {spec.hosts}")
        self.spec = spec
        self.origin_s = int(origin_s)
        self.horizon_s = int(horizon_s)
        self.hosts: list[Host] = _hosts(spec)
        self.units: list[Unit] = _units(spec, self.hosts)
        reserved = self._reserved_unit()
        showcase = self._showcase_unit()
        self.jobs: list[Job] = self._plan(self.units)
        taken = {u for u in (reserved, showcase) if u is not None}
        if taken:
            # the plan as without them (the same jobs at the same times), less the jobs that
            # would have used their GPUs
            kept = [j for j in self.jobs if all(not taken & set(p.units) for p in j.placements)]
            self.jobs = [dataclasses.replace(j, index=i) for i, j in enumerate(kept)]
        if showcase is not None and spec.showcase:
            self.jobs.append(self._showcase(spec.showcase, showcase))
        if reserved is not None and spec.attached_job:
            self.jobs.append(self._attached(spec.attached_job, reserved))

    def _showcase_unit(self) -> int | None:
        """The unit a showcase job holds: host 0's first GPU (a whole one)."""
        if not self.spec.showcase:
            return None
        from fleetscope.errors import ConfigError

        scenario = SCENARIOS.get(self.spec.showcase)
        if scenario is None or self.hosts[0].mig or scenario.min_gpus > 1 or scenario.moves:
            raise ConfigError(
                f"showcase scenario {self.spec.showcase!r}: needs a scenario of one GPU that "
                f"stays on its host ({', '.join(sorted(SCENARIOS))}) and a host 0 of whole GPUs"
            )
        return min(u.index for u in self.units if u.host == 0)

    def _showcase(self, name: str, unit: int) -> Job:
        """A simulated job like any other (owner, name and id drawn as the planner's are), of
        scenario `name`, on `unit` for the whole range: running whenever the fleet is looked at."""
        begin, stop = self.origin_s - WARMUP_S, self.origin_s + self.horizon_s
        draft = _Draft(SCENARIOS[name], [(0, (unit,), begin, stop)])
        return self._job(len(self.jobs), draft)

    def _reserved_unit(self) -> int | None:
        """The unit an attached job holds: host 0's last GPU (a whole one)."""
        if not self.spec.attached_job:
            return None
        from fleetscope.errors import ConfigError

        namespace, _, name = self.spec.attached_job.partition("/")
        if not namespace or not name or self.hosts[0].mig or self.hosts[0].scheduler != "k8s":
            raise ConfigError(
                f"attached job {self.spec.attached_job!r}: needs '<namespace>/<name>' and a "
                "Kubernetes host 0 of whole GPUs"
            )
        return max(u.index for u in self.units if u.host == 0)

    def _attached(self, job_id: str, unit: int) -> Job:
        namespace, _, name = job_id.partition("/")
        begin, stop = self.origin_s - WARMUP_S, self.origin_s + self.horizon_s
        return Job(
            index=len(self.jobs),
            job_id=job_id,
            scenario=ATTACHED,
            scheduler="k8s",
            cluster=self.spec.cluster,
            user="newcomer",
            team=namespace,
            name=f"{name} (a CPU process shown on a simulated GPU)",
            model="cpu-trainer",
            placements=(Placement(0, (unit,), begin, stop, f"{name}-0"),),
        )

    def _plan(self, units: Sequence[Unit]) -> list[Job]:
        planner = _Planner(self.spec)
        begin, stop = self.origin_s - WARMUP_S, self.origin_s + self.horizon_s
        drafts: list[_Draft] = []
        for lane in _lanes(self.hosts, units):
            rng = random.Random(stable_seed(self.spec.seed, "lane", lane.hosts[0].name))
            layouts = [entry for entry in LAYOUTS if entry[2](lane)]
            t = begin - rng.randrange(0, 6 * 3600)
            while t < stop:
                plan_s = rng.choice(PLAN_HOURS) * 3600
                layout = rng.choices(layouts, weights=[e[1] for e in layouts])[0][3]
                drafts.extend(layout(planner, rng, lane, t, t + plan_s - 60))
                t += plan_s + rng.randrange(0, 1800)
        drafts.sort(key=lambda d: (d.placements[0][2], d.placements[0][1][0]))
        return [self._job(i, d) for i, d in enumerate(drafts)]

    def _job(self, index: int, draft: _Draft) -> Job:
        rng = random.Random(stable_seed(self.spec.seed, "job", index, draft.placements[0][2]))
        host = self.hosts[draft.placements[0][0]]
        team, user = _owner(rng, draft.scenario)
        model, slug = rng.choice(MODELS)
        tag = "".join(rng.choice("abcdefghjkmnpqrstuvwxyz") for _ in range(4))
        name = f"{slug}-{rng.choice(PURPOSES)}-{tag}"
        hosts_used = [h for h, *_ in draft.placements]
        multi = len(set(hosts_used)) > 1 and not draft.scenario.moves
        placements = []
        for k, (h, units, start, end) in enumerate(draft.placements):
            pod = None
            if host.scheduler == "k8s":
                pod = (
                    (f"{name}-master-0" if k == 0 else f"{name}-worker-{k - 1}")
                    if multi
                    else f"{name}-0"
                )
            placements.append(Placement(h, units, start, end, pod))
        job_id = (
            f"{team}/{name}"
            if host.scheduler == "k8s"
            else str(900_000 + stable_seed(self.spec.seed) % 50_000 + index)
        )
        return Job(
            index=index,
            job_id=job_id,
            scenario=draft.scenario,
            scheduler=host.scheduler,
            cluster=self.spec.cluster,
            user=user,
            team=team,
            name=name,
            model=model,
            placements=tuple(placements),
        )

    def host_by_name(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        from fleetscope.errors import NotFoundError

        raise NotFoundError(f"no simulated host named {name!r}")

    def shape(self, job: Job) -> JobShape:
        """The job as truth.py sees it."""
        host = self.hosts[job.placements[0].host]
        return JobShape(
            scenario=job.scenario,
            n_gpus=job.n_gpus,
            duration_s=job.allocated_s,
            fb_total_mib=self.units[job.placements[0].units[0]].fb_total_mib,
            compute_capability=host.model.compute_capability,
            max_nodes=1 if job.scenario.moves else len({p.host for p in job.placements}),
            sm_clock_max_mhz=host.model.sm_clock_max_mhz,
            mig=host.mig,
        )


def _owner(rng: random.Random, scenario: Scenario) -> tuple[str, str]:
    """(team, user) of a job: a habit's user for their scenarios, else anyone else at random."""
    habitual = {h.user for h in HABITS}
    draw = rng.random()
    for habit in HABITS:
        if scenario.name in habit.scenarios and draw < habit.share:
            return habit.team, habit.user
    team = rng.choice(sorted(TEAMS))
    users = [u for u in TEAMS[team] if u not in habitual]
    return team, rng.choice(users)
