"""The fleet maker's jobs: a warehouse of clusters, hosts and jobs with known truth, for the
dashboard's and reports' tests, the demo and the benchmarks.

It writes contract tables (`fleetscope.contract`) as sealed Parquet segments in the layout the
readers expect (`warehouse.storage.segments`: one file per host and day, listed in the manifest), vectorized with numpy so
7 days x 1,000 GPUs at 10 s (60 M rows) is written in a couple of minutes. Every job runs at a
constant activity (plus optional noise), so a test can compute the expected GPU-hours by hand.

It must never be used on a real warehouse's folder: it writes files, and is for tests and the
benchmark only (`simulator.sim` is the faithful end-to-end source). Its output is the maker's
(`tables`): `Fleet.tables()` for `tables.connect`/`tables.publish`, or `write_segments` for the
warehouse's own layout and roll-ups; `series.Fleet` is the maker for a few crafted series.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fleetscope.contract import GPU_SAMPLES, HOST_SAMPLES, STEP_SAMPLES
from simulator.maker.tables import contract_table
from warehouse.read.rollups import update_rollups
from warehouse.storage.segments import Segment, SegmentStore


@dataclass(frozen=True)
class Job:
    """A job holding GPUs `gpu_indices` of each host in `hosts` for [start_s, end_s) of the range.

    `active` is the GR_ENGINE_ACTIVE ratio (GPU_UTIL is 100 x active); `sm_active` None leaves
    SM_ACTIVE blank as dcgm-exporter's default CSV does.
    """

    job_id: str
    hosts: tuple[str, ...]
    gpu_indices: tuple[int, ...]
    start_s: int
    end_s: int
    active: float
    sm_active: float | None = None
    tensor_active: float | None = None
    fb_used_mib: float = 20_000.0
    step_time_s: float | None = None  # step metrics are reported when set
    data_wait_share: float = 0.0
    flops_per_step: float | None = None  # the SDK's FLOPs per step per rank (measured MFU)
    compute_dtype: str = "bf16"
    user: str = "alice"
    team: str = "vision"
    name: str = "train"


@dataclass(frozen=True)
class Fault:
    """A GPU error from `at_s` on: an XID code, double-bit ECC errors, PCIe replays, throttling."""

    host: str
    gpu_index: int
    at_s: int
    xid: int = 0
    ecc_dbe: int = 0
    pcie_replays: int = 0
    thermal_throttle_s: float = 0.0


@dataclass(frozen=True)
class Fleet:
    """Hosts per cluster, GPUs per host, a time range and the sample interval."""

    clusters: dict[str, tuple[str, ...]]
    gpus_per_host: int
    start: datetime
    duration_s: int
    interval_s: int
    jobs: tuple[Job, ...] = ()
    faults: tuple[Fault, ...] = ()
    noise: float = 0.0
    seed: int = 0
    gpu_model: str = "NVIDIA H100 80GB HBM3"
    exporter_has_gr_engine: bool = True
    extra: dict[str, str] = field(default_factory=dict)

    def host_cluster(self) -> dict[str, str]:
        return {h: c for c, hosts in self.clusters.items() for h in hosts}

    def tables(self) -> dict[str, pa.Table]:
        """The whole range as contract tables (host by host), for `tables.connect`/`publish`."""
        samples, hosts = self.duration_s // self.interval_s, sorted(self.host_cluster())
        steps = [step_table(self, job) for job in self.jobs if job.step_time_s is not None]
        return {
            "gpu_samples": pa.concat_tables(gpu_table(self, h, 0, samples) for h in hosts),
            "host_samples": pa.concat_tables(host_table(self, h, 0, samples) for h in hosts),
            "step_samples": pa.concat_tables(steps) if steps else STEP_SAMPLES.empty_table(),
        }


def _days(fleet: Fleet) -> Iterator[tuple[str, int, int]]:
    """(day label, first sample index, end sample index) per UTC day of the range."""
    samples = fleet.duration_s // fleet.interval_s
    index = 0
    while index < samples:
        moment = fleet.start + timedelta(seconds=index * fleet.interval_s)
        next_day = (moment + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
        end = min(samples, -(-int((next_day - fleet.start).total_seconds()) // fleet.interval_s))
        yield moment.strftime("%Y-%m-%d"), index, end
        index = end


def gpu_table(fleet: Fleet, host: str, first: int, end: int) -> pa.Table:
    """gpu_samples rows of one host for sample indices [first, end)."""
    cluster = fleet.host_cluster()[host]
    n_t, n_g = end - first, fleet.gpus_per_host
    offsets_s = (np.arange(first, end, dtype=np.int64) * fleet.interval_s)[:, None]
    base_ms = int(fleet.start.timestamp() * 1000)
    job_of = np.full((n_t, n_g), -1, dtype=np.int32)
    for number, job in enumerate(fleet.jobs):
        if host not in job.hosts:
            continue
        running = (offsets_s >= job.start_s) & (offsets_s < job.end_s)
        for gpu in job.gpu_indices:
            job_of[:, gpu] = np.where(running[:, 0], number, job_of[:, gpu])
    active_of = np.array([j.active for j in fleet.jobs] + [0.0])
    sm_of = np.array([np.nan if j.sm_active is None else j.sm_active for j in fleet.jobs] + [0.0])
    tensor_of = np.array(
        [np.nan if j.tensor_active is None else j.tensor_active for j in fleet.jobs] + [0.0]
    )
    fb_of = np.array([j.fb_used_mib for j in fleet.jobs] + [0.0])
    index = np.where(job_of >= 0, job_of, len(fleet.jobs)).ravel()
    active = active_of[index]
    if fleet.noise:
        # crc32, not hash(): str hashes are salted per process, so the same seed drew other noise
        rng = np.random.default_rng([fleet.seed, zlib.crc32(host.encode()), first])
        active = np.clip(active + rng.normal(0.0, fleet.noise, active.shape) * (active > 0), 0, 1)
    util = np.round(active * 100.0)
    ids = np.array([j.job_id for j in fleet.jobs] + [None], dtype=object)
    job_ids = pa.DictionaryArray.from_arrays(pa.array(index.astype(np.int32)), pa.array(ids)).cast(
        pa.string()
    )
    job_ids = pc.if_else(pa.array(index == len(fleet.jobs)), None, job_ids)
    n = n_t * n_g
    gpu_index = np.tile(np.arange(n_g, dtype=np.int16), n_t)
    ts = np.repeat(base_ms + offsets_s[:, 0] * 1000, n_g)
    xid, ecc, replays, thermal_us = (np.zeros(n) for _ in range(4))
    for fault in fleet.faults:
        if fault.host != host:
            continue
        hit = (gpu_index == fault.gpu_index) & (ts >= base_ms + fault.at_s * 1000)
        xid = np.where(hit, fault.xid, xid)
        ecc = np.where(hit, fault.ecc_dbe, ecc)
        replays = np.where(hit, fault.pcie_replays, replays)
        thermal_us = np.where(hit, fault.thermal_throttle_s * 1e6, thermal_us)
    columns: dict[str, pa.Array] = {
        "ts": pa.array(ts, pa.timestamp("ms", tz="UTC")),
        "cluster": pa.array([cluster] * n, pa.string()),
        "host": pa.array([host] * n, pa.string()),
        "gpu_index": pa.array(gpu_index),
        "gpu_uuid": pa.array([f"GPU-{host}-{g}" for g in range(n_g)] * n_t, pa.string()),
        "gpu_model": pa.array([fleet.gpu_model] * n, pa.string()),
        "job_id": job_ids,
        "attribution": pa.array(["hpc_job"] * n, pa.string()),
        "gpu_util": pa.array(util),
        "gr_engine_active": pa.array(active) if fleet.exporter_has_gr_engine else pa.nulls(n),
        "sm_active": pa.array(sm_of[index] * (active > 0), from_pandas=True),
        "tensor_active": pa.array(tensor_of[index] * (active > 0), from_pandas=True),
        "fb_used_mib": pa.array(fb_of[index]),
        "power_w": pa.array(70.0 + 630.0 * active),
        "temp_c": pa.array(35.0 + 40.0 * active),
        "xid_last": pa.array(xid),
        "ecc_dbe_total": pa.array(ecc),
        "pcie_replay_total": pa.array(replays),
        "power_violation_us": pa.array(np.zeros(n)),
        "thermal_violation_us": pa.array(thermal_us),
    }
    return contract_table(GPU_SAMPLES, columns, n)


def host_table(fleet: Fleet, host: str, first: int, end: int) -> pa.Table:
    """host_samples rows (whole host) of one host for sample indices [first, end)."""
    n = end - first
    base_ms = int(fleet.start.timestamp() * 1000)
    ts = base_ms + np.arange(first, end, dtype=np.int64) * fleet.interval_s * 1000
    columns = {
        "ts": pa.array(ts, pa.timestamp("ms", tz="UTC")),
        "cluster": pa.array([fleet.host_cluster()[host]] * n, pa.string()),
        "host": pa.array([host] * n, pa.string()),
        "cpu_user_pct": pa.array(np.full(n, 20.0)),
        "cpu_iowait_pct": pa.array(np.full(n, 1.0)),
        "cpu_cores": pa.array(np.full(n, 64.0)),
    }
    return contract_table(HOST_SAMPLES, columns, n)


def step_table(fleet: Fleet, job: Job) -> pa.Table:
    """step_samples of one job: one rank per host, a step every `step_time_s`."""
    assert job.step_time_s is not None
    steps = int((job.end_s - job.start_s) / job.step_time_s)
    base_ms = int(fleet.start.timestamp() * 1000) + job.start_s * 1000
    step = np.arange(1, steps + 1, dtype=np.int64)
    ts = base_ms + np.round(step * job.step_time_s * 1000).astype(np.int64)
    frames = []
    for rank, host in enumerate(job.hosts):
        columns = {
            "ts": pa.array(ts, pa.timestamp("ms", tz="UTC")),
            "cluster": pa.array([fleet.host_cluster()[host]] * steps, pa.string()),
            "host": pa.array([host] * steps, pa.string()),
            "job_id": pa.array([job.job_id] * steps, pa.string()),
            "rank": pa.array(np.full(steps, rank, dtype=np.int32)),
            "step": pa.array(step),
            "step_time_s": pa.array(np.full(steps, job.step_time_s)),
            "data_wait_s": pa.array(np.full(steps, job.step_time_s * job.data_wait_share)),
            "batch_size": pa.array(np.full(steps, 256, dtype=np.int64)),
            "samples_per_s": pa.array(np.full(steps, 256 / job.step_time_s)),
            "flops_per_step": pa.array([job.flops_per_step] * steps, pa.float64()),
            "compute_dtype": pa.array(
                [job.compute_dtype if job.flops_per_step else None] * steps, pa.string()
            ),
        }
        frames.append(contract_table(STEP_SAMPLES, columns, steps))
    return pa.concat_tables(frames)


def write_segments(
    fleet: Fleet, segments_dir: Path, rollups: bool = True, slice_s: int | None = None
) -> int:
    """Publish the fleet's contract tables as live warehouse segments (one file per host and day,
    through the warehouse's own `SegmentStore`, manifest included) and, unless `rollups` is
    False, the warehouse's roll-ups of them; returns the gpu_samples row count.

    With `slice_s`, GPU and host samples are written as the ingest writer publishes them instead:
    one file per `slice_s` of time holding every host's samples, in time order (so compacted
    files are time-ordered, as in a real warehouse, and readers' time filters prune)."""
    store = SegmentStore(segments_dir)
    published: dict[str, list[Segment]] = {}
    seq = store.snapshot().published_seq
    rows = 0

    def add(table: str, day: str, data: pa.Table) -> None:
        nonlocal seq
        seq += 1
        published.setdefault(table, []).append(
            store.write_file(store.new_name(table, day, seq), data)
        )

    hosts = sorted(fleet.host_cluster())
    for day, first, end in _days(fleet):
        if slice_s is None:
            for host in hosts:
                table = gpu_table(fleet, host, first, end)
                rows += table.num_rows
                add("gpu_samples", day, table)
                add("host_samples", day, host_table(fleet, host, first, end))
            continue
        step = max(1, slice_s // fleet.interval_s)
        for lo in range(first, end, step):
            hi = min(end, lo + step)
            table = pa.concat_tables(gpu_table(fleet, h, lo, hi) for h in hosts)
            table = table.sort_by([("ts", "ascending"), ("host", "ascending")])
            rows += table.num_rows
            add("gpu_samples", day, table)
            add(
                "host_samples",
                day,
                pa.concat_tables(host_table(fleet, h, lo, hi) for h in hosts).sort_by("ts"),
            )
    for job in fleet.jobs:
        if job.step_time_s is not None:
            steps = step_table(fleet, job)
            for part in store.write("step_samples", steps, seq + 1):
                published.setdefault("step_samples", []).append(part)
            seq += 1
    store.publish(seq, published)
    if rollups:
        update_rollups(store)
    return rows


def random_jobs(
    clusters: dict[str, tuple[str, ...]],
    gpus_per_host: int,
    duration_s: int,
    seed: int,
    teams: Sequence[str] = ("vision", "nlp", "speech", "recsys"),
) -> tuple[Job, ...]:
    """A plausible week: each host runs back-to-back jobs of 2-24 h on all or half its GPUs, with
    a mix of healthy, idle, stalled and low-SM jobs (the scenarios of the design card)."""
    rng = random.Random(seed)
    jobs: list[Job] = []
    scenarios = (
        (0.92, 0.75, 0.45, 0.0),  # healthy
        (0.0, 0.0, 0.0, 0.0),  # idle allocation
        (0.45, 0.3, 0.2, 0.45),  # data-loader stall
        (0.85, 0.35, 0.0, 0.02),  # low SM, no tensor cores
    )
    number = 0
    for hosts in clusters.values():
        for host in hosts:
            for half in (range(gpus_per_host // 2), range(gpus_per_host // 2, gpus_per_host)):
                at = rng.randrange(0, 3600)
                while at < duration_s:
                    length = rng.randrange(2 * 3600, 24 * 3600)
                    active, sm, tensor, wait = rng.choices(scenarios, weights=(6, 1, 2, 1))[0]
                    number += 1
                    team = teams[number % len(teams)]
                    jobs.append(
                        Job(
                            job_id=f"job-{number:05d}",
                            hosts=(host,),
                            gpu_indices=tuple(half),
                            start_s=at,
                            end_s=min(duration_s, at + length),
                            active=active,
                            sm_active=sm,
                            tensor_active=tensor,
                            step_time_s=None if active == 0 else 30.0,
                            data_wait_share=wait,
                            user=f"user{number % 40:02d}",
                            team=team,
                            name=f"{team}-train",
                        )
                    )
                    at += length + rng.randrange(0, 2 * 3600)
    return tuple(jobs)
