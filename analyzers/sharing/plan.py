"""The sharing plan: candidates, packing and interference (method and sources: docs/sharing.md).

1. Candidates: job GPUs not already on a MIG slice (multi-GPU jobs' GPUs too, unless
   `single_gpu_only`), that hold their GPU for at least
   `min_hours` of the window and use it persistently little: mean SM activity <= `max_sm_mean`,
   95th percentile <= `max_sm_p95`, peak memory <= `max_memory_share` of the GPU, and, when
   the job reports its steps, waits on input for at most `max_data_wait_share` of step time
   (an input-starved job looks light only until its DataLoader is fixed: P1 comes first).
2. Packing: per GPU product, first-fit decreasing by demand (SM mean + memory share): a job GPU
   joins the first group it fits that holds no other GPU of its job (NCCL cannot put two ranks
   on one device), else opens one; a group of k GPUs frees k - 1 GPUs. A multi-GPU job is only
   a candidate when every one of its GPUs is (a synchronous job runs at its slowest rank's pace).
3. Fit and interference per mechanism; the group takes the feasible one with the smallest
   worst expected slowdown, MIG first on a tie (it isolates faults and memory):
   - MIG: each job gets the smallest profile with its peak SM share (x 7) and peak memory plus
     headroom; the profiles must place on one GPU (mig.py). Expected slowdown = the job's mean
     SM (or DRAM) demand over its slice's share, at least 1; risk uses the 95th percentiles.
   - MPS (spatial, like Salus's fine-grained sharing): memory must fit: sum of peaks + a CUDA
     context per process + headroom <= the GPU. Expected slowdown of job i = 1 + `mps_gamma` x
     the others' mean SM (or DRAM) activity + the oversubscribed share of the combined demand;
     risk with 95th percentiles.
   - Time-slicing (Gandiva's suspend/resume packing): memory as MPS; slowdown of job i = 1 +
     the others' mean utilization (the chance another holds the GPU when i wants it).
   A group is feasible when every job's expected slowdown <= `max_slowdown`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyzers.sharing.mig import MigProfile, mig_profiles, product_of, smallest_profile
from analyzers.sharing.usage import GpuUse

__all__ = ["Group", "Member", "Plan", "SharingThresholds", "plan_sharing"]

MECHANISMS = ("mig", "mps", "time-slicing")


@dataclass(frozen=True)
class SharingThresholds:
    max_sm_mean: float = 0.30  # Gandiva/Salus: GPUs persistently below a third busy pack well
    max_sm_p95: float = 0.50  # even its busy moments leave half the SMs idle
    max_memory_share: float = 0.50  # footprint well under capacity (Zico: peaks, not means)
    min_hours: float = 6.0  # persistent: holds the GPU at least this long in the window
    memory_headroom: float = 0.10  # of the GPU, for fragmentation and footprint growth (Zico)
    context_mib: float = 512.0  # a CUDA context per process under MPS / time-slicing
    max_group: int = 4  # jobs per GPU under MPS / time-slicing (Gandiva packs 2-4)
    mps_gamma: float = 0.3  # cache / bandwidth interference per unit of co-runner activity
    max_slowdown: float = 1.25  # the largest expected slowdown a proposal may cost a job
    single_gpu_only: bool = False  # leave multi-GPU jobs out altogether
    idle_util_pct: float = 1.0  # below this the fix is to release the GPU (R1/R3), not share it
    max_data_wait_share: float = 0.05  # P1's line (TB plugin T1): above it the low use is the
    # input pipeline's, not the job's demand; fixed, the job fills its GPU (P1 before sharing)


@dataclass(frozen=True)
class Member:
    use: GpuUse
    expected_slowdown: float
    risk_slowdown: float
    mig_profile: str | None = None


@dataclass(frozen=True)
class Group:
    product: str
    mechanism: str
    members: tuple[Member, ...]
    memory_needed_mib: float
    window_h: float
    constraints: tuple[str, ...]

    @property
    def gpus_freed(self) -> int:
        return len(self.members) - 1

    @property
    def freed_gpu_hours_per_week(self) -> float:
        """GPU-hours no longer held: the members' hours minus the shared GPU's (the longest),
        scaled from the window to a week."""
        hours = [m.use.alloc_h for m in self.members]
        return (sum(hours) - max(hours)) * 168.0 / self.window_h


@dataclass(frozen=True)
class Plan:
    window_h: float
    candidates: int
    groups: tuple[Group, ...]
    reasons: dict[str, int] = field(default_factory=dict)  # why GPUs were not candidates

    @property
    def gpus_freed(self) -> int:
        return sum(g.gpus_freed for g in self.groups)

    @property
    def freed_gpu_hours_per_week(self) -> float:
        return sum(g.freed_gpu_hours_per_week for g in self.groups)


def _reason(u: GpuUse, th: SharingThresholds) -> str | None:
    if u.job_gpus > 1 and th.single_gpu_only:
        return "multi-GPU job"
    if u.on_mig:
        return "already on MIG"
    if u.alloc_h < th.min_hours:
        return "too short"
    if u.util_mean_pct < th.idle_util_pct:
        return "idle: release it (R1/R3)"
    if u.sm_mean > th.max_sm_mean or u.sm_p95 > th.max_sm_p95:
        return "busy"
    if u.data_wait_share is not None and u.data_wait_share > th.max_data_wait_share:
        return "input-bound: fix its input pipeline first (P1)"
    if u.memory_share > th.max_memory_share:
        return "memory"
    return None


def _mig(members: list[GpuUse], th: SharingThresholds) -> list[Member] | None:
    profiles = mig_profiles(members[0].gpu_model, members[0].fb_total_mib)
    if not profiles:
        return None
    chosen: list[MigProfile] = []
    for u in members:
        need_gib = u.fb_used_max_mib * (1 + th.memory_headroom) / 1024.0
        p = smallest_profile(profiles, u.sm_p95, need_gib)
        if p is None:
            return None
        chosen.append(p)
    if sum(p.sm_sevenths for p in chosen) > 7 or sum(p.memory_eighths for p in chosen) > 8:
        return None
    for p in set(chosen):
        if chosen.count(p) > p.max_instances:
            return None
    out = []
    for u, p in zip(members, chosen, strict=True):
        bw = p.memory_eighths / 8.0
        exp = max(1.0, u.sm_mean / p.sm_fraction, u.dram_mean / bw)
        risk = max(1.0, u.sm_p95 / p.sm_fraction, u.dram_p95 / bw)
        out.append(Member(u, exp, risk, p.name))
    return out


def _memory_fits(members: list[GpuUse], th: SharingThresholds) -> bool:
    need = sum(u.fb_used_max_mib + th.context_mib for u in members)
    return need <= members[0].fb_total_mib * (1 - th.memory_headroom)


def _mps(members: list[GpuUse], th: SharingThresholds) -> list[Member] | None:
    if len(members) > th.max_group or not _memory_fits(members, th):
        return None

    def slow(i: int, sm: list[float], dram: list[float]) -> float:
        worst = 1.0
        for demand in (sm, dram):
            others = sum(demand) - demand[i]
            over = max(0.0, sum(demand) - 1.0) / sum(demand) if sum(demand) > 0 else 0.0
            worst = max(worst, 1.0 + th.mps_gamma * others + over)
        return worst

    sm_m, dr_m = [u.sm_mean for u in members], [u.dram_mean for u in members]
    sm_p, dr_p = [u.sm_p95 for u in members], [u.dram_p95 for u in members]
    return [Member(u, slow(i, sm_m, dr_m), slow(i, sm_p, dr_p)) for i, u in enumerate(members)]


def _time_slicing(members: list[GpuUse], th: SharingThresholds) -> list[Member] | None:
    if len(members) > th.max_group or not _memory_fits(members, th):
        return None
    mean = [u.util_mean_pct / 100.0 for u in members]
    p95 = [u.util_p95_pct / 100.0 for u in members]
    return [
        Member(u, 1.0 + sum(mean) - mean[i], 1.0 + sum(p95) - p95[i]) for i, u in enumerate(members)
    ]


_FITS = {"mig": _mig, "mps": _mps, "time-slicing": _time_slicing}
CONSTRAINTS = {
    "mig": (
        "MIG mode set on the GPU (drains it; a reset on A100)",
        "no CUDA peer-to-peer / NVLink between MIG instances",
        "each job sees only its slice's SMs and memory",
    ),
    "mps": (
        "one MPS control daemon per GPU; clients of one user (or multi-user MPS)",
        "a fatal fault in one client can take down the others (Volta+ MPS isolates address "
        "spaces, not faults)",
        "set CUDA_MPS_ACTIVE_THREAD_PERCENTAGE to cap each client's SMs",
    ),
    "time-slicing": (
        "the device plugin's time-slicing replicas (Kubernetes) or shared Slurm GRES",
        "no memory isolation: a job over its peak can make another fail with out-of-memory",
    ),
}


def _best(members: list[GpuUse], th: SharingThresholds) -> tuple[str, list[Member]] | None:
    options = []
    for rank, name in enumerate(MECHANISMS):
        fitted = _FITS[name](members, th)
        if fitted and max(m.expected_slowdown for m in fitted) <= th.max_slowdown:
            options.append((max(m.expected_slowdown for m in fitted), rank, name, fitted))
    if not options:
        return None
    _, _, name, fitted = min(options, key=lambda o: (round(o[0], 6), o[1]))
    return name, fitted


def _product_key(u: GpuUse) -> str:
    return product_of(u.gpu_model, u.fb_total_mib) or f"{u.gpu_model} {u.fb_total_mib:.0f} MiB"


def plan_sharing(uses: list[GpuUse], window_h: float, th: SharingThresholds | None = None) -> Plan:
    th = th or SharingThresholds()
    reasons: dict[str, int] = {}
    candidates: dict[str, list[GpuUse]] = {}
    why_of = {(u.job_id, u.host, u.gpu): _reason(u, th) for u in uses}
    blocked_jobs = {job for (job, _, _), why in why_of.items() if why is not None}
    for u in uses:
        why = why_of[(u.job_id, u.host, u.gpu)]
        if why is None and u.job_id in blocked_jobs:
            why = "another GPU of the job is busy"
        if why is None:
            candidates.setdefault(_product_key(u), []).append(u)
        else:
            reasons[why] = reasons.get(why, 0) + 1
    groups: list[Group] = []
    for product, pool in sorted(candidates.items()):
        pool.sort(key=lambda u: (-(u.sm_mean + u.memory_share), u.job_id, u.host, u.gpu))
        open_groups: list[list[GpuUse]] = []
        for u in pool:
            for g in open_groups:
                if any(o.job_id == u.job_id for o in g):
                    continue
                if len(g) < max(th.max_group, 7) and _best([*g, u], th) is not None:
                    g.append(u)
                    break
            else:
                open_groups.append([u])
        for g in open_groups:
            if len(g) < 2:
                continue
            best = _best(g, th)
            assert best is not None
            name, fitted = best
            need = sum(u.fb_used_max_mib for u in g)
            groups.append(Group(product, name, tuple(fitted), need, window_h, CONSTRAINTS[name]))
    return Plan(window_h, sum(len(p) for p in candidates.values()), tuple(groups), reasons)
