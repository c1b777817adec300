"""Batch generation: the tables an agent fleet would have shipped, without HTTP, as Arrow.

What it is for: analyzer evaluation and benchmarks need days of samples for a thousand GPUs in
seconds. `tables()` evaluates every (GPU, second) of a time grid at once with signals.py and
builds fleetscope.contract tables column by column (strings dictionary-encoded from small
tables, nulls from masks), never row by row.

The gpu_samples rows are what the collector makes of the served pages: the same values (the
page's `%f` text parses back to them exactly), each exporter field in the column that
fleetscope.dcgm_fields maps it to, unknown fields in `extra`, `gpu_util = 100 x gr_engine_active`
on MIG rows (fleetscope.normalize), and no row for a host whose scrape failed at that second
(its exporter answered 503). host_samples has one whole-host row and one row per job cgroup per
host and second (I/O wait only on the whole-host rows: cgroup v2 has no per-job I/O wait, so the
agent's job rows leave it null); step_samples one row per training rank per second of the grid at
which the rank has finished a step since the previous grid second, for the step it finished last
(steps longer than the grid are each reported once; shorter ones are sampled).

Must never: format or parse exposition text, or loop over rows in Python.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fleetscope.contract import GPU_SAMPLES, HOST_SAMPLES, STEP_SAMPLES, TS
from fleetscope.dcgm_fields import FIELDS
from simulator.fields import EXPORTER_FIELDS
from simulator.fleet import Fleet
from simulator.hardware import GPU_HOST
from simulator.scenarios import Periodic, StepProfile
from simulator.signals import Frame, SignalModel, hash_u01

__all__ = ["grid_frame", "scrape_failed", "tables"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

HOST_CORES: Final = GPU_HOST.logical_cpus
HOST_MEM_BYTES: Final = GPU_HOST.mem_total_bytes
_GIB: Final = 1024**3


def _strings(indices: I64, dictionary: list[str]) -> pa.Array:
    """A string column from indices into `dictionary`; -1 is null. Decoded from a dictionary
    array: a third of the CPU of `take` on the dictionary (bench.fresh_week builds a week)."""
    table = pa.array(dictionary or [""], type=pa.string())
    codes = pa.array(indices.astype(np.int32), type=pa.int32(), mask=indices < 0)
    return pa.DictionaryArray.from_arrays(codes, table).cast(pa.string())


def _floats(values: F64) -> pa.Array:
    return pa.array(values, type=pa.float64(), from_pandas=True)  # NaN -> null


def _timestamps(t: I64) -> pa.Array:
    return pa.array(t * 1000, type=TS)  # straight from int64 milliseconds: no cast pass


def scrape_failed(sim: SignalModel, host: I64, t: I64) -> npt.NDArray[np.bool_]:
    """Whether the host's exporter answered 503 at second t (deterministic per host and second)."""
    rates = np.array([h.scrape_failure_rate for h in sim.fleet.hosts])
    return hash_u01(sim.seed, host, t, 7) < rates[host]


def grid_frame(sim: SignalModel, t0: int, t1: int, step_s: int) -> Frame:
    """Every unit at every second t0, t0 + step_s, ... < t1, ordered by (t, unit)."""
    times = np.arange(int(t0), int(t1), int(step_s), dtype=np.int64)
    n_units = len(sim.fleet.units)
    unit = np.tile(np.arange(n_units, dtype=np.int64), len(times))
    t = np.repeat(times, n_units)
    return sim.evaluate(unit, t)


def tables(sim: SignalModel, t0: int, t1: int, step_s: int) -> dict[str, pa.Table]:
    """gpu_samples, host_samples and step_samples for [t0, t1) every step_s seconds."""
    frame = grid_frame(sim, t0, t1, step_s)
    return {
        "gpu_samples": _gpu_table(sim, frame),
        "host_samples": _host_table(sim, frame),
        "step_samples": _step_table(sim, frame, int(step_s)),
    }


class _Dictionaries:
    """Small string tables the columns index into."""

    def __init__(self, sim: SignalModel) -> None:
        fleet = sim.fleet
        self.hosts = [h.name for h in fleet.hosts]
        self.uuids = [u.uuid for u in fleet.units]
        self.models = [h.model.model_name for h in fleet.hosts]
        self.jobs = [j.job_id for j in fleet.jobs]
        self.teams = [j.team for j in fleet.jobs]
        pods = sorted({p for p in sim.seg_pod if p})
        self.pods = pods
        pod_index = {p: i for i, p in enumerate(pods)}
        self.seg_pod = np.array([pod_index[p] if p else -1 for p in sim.seg_pod] or [-1])
        self.k8s = np.array([j.scheduler == "k8s" for j in fleet.jobs] or [False])
        self.mig_profiles = sorted({u.mig_profile for u in fleet.units if u.mig_profile})
        profile_index = {p: i for i, p in enumerate(self.mig_profiles)}
        self.unit_profile = np.array(
            [profile_index[u.mig_profile] if u.mig_profile else -1 for u in fleet.units]
        )
        self.unit_instance = np.array(
            [u.mig_instance_id if u.mig_instance_id is not None else -1 for u in fleet.units]
        )
        self.unit_gpu = np.array([u.gpu_index for u in fleet.units], dtype=np.int16)


def _job_columns(
    sim: SignalModel, d: _Dictionaries, frame: Frame, keep: npt.NDArray[np.bool_]
) -> dict[str, pa.Array]:
    job = frame.job[keep]
    seg = np.maximum(frame.seg[keep], 0)
    has = job >= 0
    k8s = has & d.k8s[np.maximum(job, 0)]
    return {
        "job_id": _strings(np.where(has, job, -1), d.jobs),
        "attribution": _strings(np.where(has, np.where(k8s, 0, 1), -1), ["k8s", "hpc_job"]),
        "pod": _strings(np.where(k8s, d.seg_pod[seg], -1), d.pods),
        "namespace": _strings(np.where(k8s, job, -1), d.teams),
        "container": _strings(np.where(k8s, 0, -1), ["trainer"]),
    }


def _gpu_table(sim: SignalModel, frame: Frame) -> pa.Table:
    d = _Dictionaries(sim)
    host = sim.u_host[frame.unit]
    keep = ~scrape_failed(sim, host, frame.t)
    unit = frame.unit[keep]
    n = len(unit)
    columns: dict[str, pa.Array] = {
        "ts": _timestamps(frame.t[keep]),
        "cluster": _strings(np.zeros(n, dtype=np.int64), [sim.fleet.spec.cluster]),
        "host": _strings(host[keep], d.hosts),
        "gpu_index": pa.array(d.unit_gpu[unit], type=pa.int16()),
        "gpu_uuid": _strings(unit, d.uuids),
        "gpu_model": _strings(host[keep], d.models),
        "mig_profile": _strings(d.unit_profile[unit], d.mig_profiles),
        "mig_instance_id": pa.array(
            d.unit_instance[unit], type=pa.int16(), mask=d.unit_instance[unit] < 0
        ),
        **_job_columns(sim, d, frame, keep),
    }
    extras: dict[str, F64] = {}
    for field in EXPORTER_FIELDS:
        values = frame.values[field.key][keep]
        spec = FIELDS.get(field.name)
        if spec is None:
            extras[field.name] = values
            continue
        columns[spec.column] = _floats(values * spec.scale)
    mig = sim.u_mig[unit]
    gr = frame.values["gr_engine_active"][keep]
    util = frame.values["gpu_util"][keep]
    columns["gpu_util"] = _floats(np.where(mig & ~np.isnan(gr), gr * 100.0, util))
    columns["extra"] = _extra(n, extras)
    return pa.Table.from_pydict(
        {f.name: columns.get(f.name, pa.nulls(n, f.type)) for f in GPU_SAMPLES},
        schema=GPU_SAMPLES,
    )


def _extra(n: int, extras: dict[str, F64]) -> pa.Array:
    """The fields the agent has no column for, as the `extra` map (name -> value)."""
    names = list(extras)
    if not names:
        return pa.nulls(n, GPU_SAMPLES.field("extra").type)
    values = np.stack([extras[name] for name in names], axis=1).reshape(-1)
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * len(names), type=pa.int32())
    keys = _strings(np.tile(np.arange(len(names), dtype=np.int64), n), names)
    return pa.MapArray.from_arrays(offsets, keys, pa.array(values, type=pa.float64()))


def _host_table(sim: SignalModel, frame: Frame) -> pa.Table:
    """One row per (second, host) for the whole host, and one per (second, host, job)."""
    d = _Dictionaries(sim)
    fleet: Fleet = sim.fleet
    n_hosts = len(fleet.hosts)
    times, t_idx = np.unique(frame.t, return_inverse=True)
    host = sim.u_host[frame.unit]
    units_per_host = np.bincount(sim.u_host, minlength=n_hosts)
    cores_per_unit = HOST_CORES / units_per_host[host]
    cpu = sim.cpu_pct(frame.level)
    alloc = frame.allocated
    n_jobs = max(len(fleet.jobs), 1)
    key = (t_idx[alloc] * n_hosts + host[alloc]) * n_jobs + frame.job[alloc]
    keys = np.unique(key)
    cores = np.bincount(np.searchsorted(keys, key), weights=cores_per_unit[alloc])
    busy = np.bincount(np.searchsorted(keys, key), weights=(cpu * cores_per_unit)[alloc])
    job = keys % n_jobs
    job_host = (keys // n_jobs) % n_hosts
    job_t = times[keys // n_jobs // n_hosts]
    jitter = 1.0 + 0.04 * (hash_u01(sim.seed, job, job_t, 11) - 0.5)
    job_cpu = busy / cores * jitter

    whole_key = t_idx * n_hosts + host
    whole_busy = np.bincount(
        whole_key,
        weights=np.where(alloc, cpu * cores_per_unit, 0.0),
        minlength=len(times) * n_hosts,
    )
    whole_t = np.repeat(times, n_hosts)
    whole_host = np.tile(np.arange(n_hosts, dtype=np.int64), len(times))
    whole_cpu = whole_busy / HOST_CORES + 1.0
    # I/O wait of the whole host: each unit's cores at its level's I/O wait, free cores at the
    # idle level's (the same 0.4 % as every level that does no I/O).
    iowait = sim.iowait_pct(frame.level)
    idle_iowait = float(sim.iowait_pct(np.zeros(1, dtype=np.int64))[0])
    whole_io = idle_iowait + np.bincount(
        whole_key,
        weights=np.where(alloc, (iowait - idle_iowait) * cores_per_unit, 0.0),
        minlength=len(times) * n_hosts,
    ) / float(HOST_CORES)

    t_all = np.concatenate([whole_t, job_t])
    host_all = np.concatenate([whole_host, job_host])
    job_all = np.concatenate([np.full(len(whole_t), -1, dtype=np.int64), job])
    cpu_all = np.concatenate([whole_cpu, job_cpu])
    cores_all = np.concatenate([np.full(len(whole_t), float(HOST_CORES)), cores])
    mem_total = np.concatenate([np.full(len(whole_t), float(HOST_MEM_BYTES)), cores * 16.0 * _GIB])
    n = len(t_all)
    columns = {
        "ts": _timestamps(t_all),
        "cluster": _strings(np.zeros(n, dtype=np.int64), [fleet.spec.cluster]),
        "host": _strings(host_all, d.hosts),
        "job_id": _strings(job_all, d.jobs),
        "cpu_user_pct": _floats(np.round(cpu_all * 0.9, 3)),
        "cpu_system_pct": _floats(np.round(cpu_all * 0.1, 3)),
        "cpu_iowait_pct": _floats(
            np.concatenate([np.round(whole_io, 3), np.full(len(job_t), np.nan)])
        ),
        "cpu_cores": _floats(cores_all),
        "mem_used_bytes": _floats(np.round(mem_total * (0.15 + 0.004 * cpu_all))),
        "mem_total_bytes": _floats(mem_total),
        "net_rx_bytes_s": _floats(np.round(cpu_all * 2.5e6)),
        "net_tx_bytes_s": _floats(np.round(cpu_all * 1.0e6)),
        "disk_read_bytes_s": _floats(np.round(cpu_all * 4.0e6)),
        "disk_write_bytes_s": _floats(np.round(cpu_all * 0.5e6)),
        "load1": _floats(np.round(cpu_all * cores_all / 100.0, 2)),
    }
    return pa.Table.from_pydict(columns, schema=HOST_SAMPLES)


def _steps_finished(profile: StepProfile, elapsed: F64) -> F64:
    """StepProfile.steps_finished, vectorized (whole numbers as floats; negative before 0 s)."""
    base = profile.step_time_s
    steps = np.floor(elapsed / base)
    if not profile.outlier_gaps:
        return steps
    cycle = profile.outlier_cycle
    offsets = np.array(profile.outlier_offsets)
    position = np.arange(1, cycle + 1)
    extra = (profile.outlier_factor - 1.0) * base
    ends = base * position + extra * (offsets[None, :] <= position[:, None] - 1).sum(axis=1)
    rest = elapsed - base * (profile.outlier_first - 1)
    cycles = np.floor(rest / ends[-1])
    within = rest - cycles * ends[-1]
    done = (
        profile.outlier_first - 1 + cycles * cycle + np.searchsorted(ends, within + 1e-9, "right")
    )
    return np.where(rest < 0, steps, done)


def _outlier(profile: StepProfile, step: I64) -> npt.NDArray[np.bool_]:
    """StepProfile.is_outlier, vectorized."""
    if not profile.outlier_gaps:
        return np.zeros(step.shape, dtype=bool)
    offset = (step - profile.outlier_first) % profile.outlier_cycle
    return (step >= profile.outlier_first) & np.isin(offset, profile.outlier_offsets)


def _step_table(sim: SignalModel, frame: Frame, step_s: int) -> pa.Table:
    """The last finished step of every training rank at each second of the grid, once per step."""
    d = _Dictionaries(sim)
    fleet = sim.fleet
    jobs = fleet.jobs
    steps = [j.scenario.steps for j in jobs]
    profiles = sorted({p for p in steps if p is not None}, key=repr)
    profile_of = np.array([profiles.index(p) if p else -1 for p in steps] or [-1])
    wait_share = np.array([s.data_wait_share if s else 0.0 for s in steps] or [0.0])
    workers = np.array([s.workers_per_rank if s else 0 for s in steps] or [0], dtype=np.int32)
    batch = np.array([s.batch_size if s else 0 for s in steps] or [0], dtype=np.int64)
    mfu = np.array([s.mfu if s and s.mfu else 0.0 for s in steps] or [0.0])
    has_steps = profile_of >= 0
    train_share = np.array(
        [
            1.0 - j.scenario.alternation.share
            if isinstance(j.scenario.alternation, Periodic)
            else 1.0
            for j in jobs
        ]
        or [1.0]
    )
    lead = sim.j_lead
    rows = frame.allocated & sim.training(frame.level)
    rows &= has_steps[np.maximum(frame.job, 0)]
    job = frame.job[rows]
    rank = frame.rank[rows]
    t = frame.t[rows]
    unit = frame.unit[rows]
    elapsed = (t - sim.j_start[job] - lead[job]).astype(np.float64) * train_share[job]
    before = elapsed - step_s * train_share[job]
    step_f: F64 = np.zeros(len(job), dtype=np.float64)
    step_before: F64 = np.zeros(len(job), dtype=np.float64)
    outlier = np.zeros(len(job), dtype=bool)
    nominal: F64 = np.ones(len(job), dtype=np.float64)
    factor: F64 = np.ones(len(job), dtype=np.float64)
    for k, profile in enumerate(profiles):
        mine = profile_of[job] == k
        step_f[mine] = _steps_finished(profile, elapsed[mine])
        step_before[mine] = _steps_finished(profile, before[mine])
        nominal[mine] = profile.step_time_s
        factor[mine] = profile.outlier_factor
    step = step_f.astype(np.int64)
    for k, profile in enumerate(profiles):
        mine = profile_of[job] == k
        outlier[mine] = _outlier(profile, step[mine])
    fresh = step_f > step_before  # a step finished since the previous grid second
    job, rank, t, unit, step = job[fresh], rank[fresh], t[fresh], unit[fresh], step[fresh]
    nominal, factor, outlier = nominal[fresh], factor[fresh], outlier[fresh]
    u1 = hash_u01(sim.seed, job, rank, step, 21)
    u2 = hash_u01(sim.seed, job, rank, step, 22)
    base_step = nominal * (1.0 + 0.05 * (2.0 * u1 - 1.0))
    this_step: F64 = np.where(outlier, base_step * factor, base_step)
    wait = wait_share[job] * base_step * (1.0 + 0.05 * (2.0 * u2 - 1.0))
    n = len(job)
    pid = (10_000 + (hash_u01(sim.seed, job, rank, 23) * 4_000_000).astype(np.int64)).astype(
        np.int32
    )
    columns = {
        "ts": _timestamps(t),
        "cluster": _strings(np.zeros(n, dtype=np.int64), [fleet.spec.cluster]),
        "host": _strings(sim.u_host[unit], d.hosts),
        "job_id": _strings(job, d.jobs),
        "rank": pa.array(rank.astype(np.int32), type=pa.int32()),
        "pid": pa.array(pid, type=pa.int32()),
        "step": pa.array(step, type=pa.int64()),
        "step_time_s": _floats(np.round(this_step, 6)),
        "data_wait_s": _floats(np.round(wait, 6)),
        "h2d_copy_s": _floats(np.round(base_step * 0.02, 6)),
        "batch_size": pa.array(batch[job], type=pa.int64()),
        "samples_per_s": _floats(np.round(batch[job] / this_step, 3)),
        "dataloader_workers": pa.array(workers[job], type=pa.int32()),
        **_flops_columns(mfu[job] * sim.u_peak_flops[unit] * nominal),
    }
    return pa.Table.from_pydict(columns, schema=STEP_SAMPLES)


def _flops_columns(flops: F64) -> dict[str, pa.Array]:
    """flops_per_step and compute_dtype, null where the job's script reports none (0)."""
    reported = flops > 0
    return {
        "flops_per_step": pa.array(np.round(flops), type=pa.float64(), mask=~reported),
        "compute_dtype": pa.array(["bf16" if r else None for r in reported.tolist()], pa.string()),
    }
