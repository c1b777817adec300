"""Metric values as a deterministic, vectorized function of (seed, GPU, second).

What it is for: the one place values are computed, for a live page (8 GPUs at one second) and
for batch generation (a thousand GPUs over hours) alike, so both agree to the last printed digit.
Every element is computed from its own (unit, t) with integer hashing (splitmix64) and
element-wise IEEE arithmetic only; no transcendental functions and no reductions, because SIMD
paths of those may differ with array length. Floats are snapped to values whose `%f` text parses
back to the same double (`exact_f`), so a parsed page equals the batch row bit for bit.

Time resolution is one second: DCGM updates a field at most once per its watch interval, and the
simulated exporter behaves as if that interval were 1 s.

Must never: read the clock, format text, or allocate per element in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from simulator.fields import EXPORTER_FIELDS
from simulator.fleet import Fleet, stable_seed
from simulator.levels import CRASHED, FREE, LEVELS
from simulator.scenarios import Periodic, RandomBlocks

__all__ = ["Frame", "SignalModel", "exact_f", "hash_u01", "splitmix64"]

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
U64 = npt.NDArray[np.uint64]
B = npt.NDArray[np.bool_]

_KEY_SPAN: Final = 1 << 34  # seconds; unit * _KEY_SPAN + t orders segments by (unit, start)
_GOLDEN: Final = np.uint64(0x9E3779B97F4A7C15)
_NOISE: Final = 0.03  # +-3 % uniform jitter on every level-driven value
_LEVEL_INDEX: Final = {level.name: i for i, level in enumerate(LEVELS)}
_REASON_GPU_IDLE: Final = 0x1  # DCGM_CLOCKS_EVENT_REASON_GPU_IDLE
_REASON_THERMAL: Final = 0x20 | 0x40  # SW_THERMAL | HW_THERMAL (dcgm_structs.h)
_WINDOW: Final = 20  # random blocks are stratified over windows of this many blocks
_COPRIME: Final = np.array([1, 3, 7, 9, 11, 13, 17, 19], dtype=np.int64)


def splitmix64(x: U64) -> U64:
    """Sebastiano Vigna's splitmix64 finalizer, element-wise; wraps modulo 2**64 by design."""
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hash_u01(*parts: npt.NDArray[Any] | np.integer[Any] | int) -> F64:
    """Uniform [0, 1) from integer arrays (or scalars), combined in order."""
    acc = np.zeros(1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for part in parts:
            acc = splitmix64(acc ^ np.asarray(part).astype(np.uint64))
    return (acc >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def exact_f(values: F64) -> F64:
    """Snap to doubles that survive `%f` printing and parsing unchanged.

    Below 2**33 a double's spacing is under 1e-6, so only multiples of 1e-6 round-trip: snap to
    the nearest. From 2**33 up the spacing exceeds 1.9e-6 and every double round-trips.
    """
    return np.where(np.abs(values) < 2.0**33, np.rint(values * 1e6) / 1e6, values)


@dataclass
class Frame:
    """Per element: which unit and second, the allocation found, and every exporter value."""

    unit: I64
    t: I64
    seg: I64  # last segment on the unit starting at or before t, or -1
    allocated: B
    job: I64  # job index where allocated, else -1
    rank: I64
    level: I64  # index into scenarios.LEVELS
    values: dict[str, F64]  # EXPORTER_FIELDS key -> value, NaN where the exporter prints none


class SignalModel:
    """A Fleet compiled into flat arrays, evaluated for any (unit, t) arrays."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self.seed = np.uint64(stable_seed(fleet.spec.seed, "signals"))
        self._levels = {
            attr: np.array([getattr(level, attr) for level in LEVELS], dtype=np.float64)
            for attr in (
                "util_pct",
                "sm_active",
                "sm_occupancy",
                "tensor_active",
                "dram_active",
                "fp16_active",
                "fp32_active",
                "fp64_active",
                "pcie_tx_gbs",
                "pcie_rx_gbs",
                "nvlink_gbs",
                "fb_frac",
                "cpu_pct",
                "iowait_pct",
                "training",
            )
        }
        self._compile_units()
        self._compile_jobs()
        self._compile_segments()

    # -- compilation --------------------------------------------------------------------------
    def _compile_units(self) -> None:
        fleet = self.fleet
        hosts = fleet.hosts
        units = fleet.units
        self.u_host = np.array([u.host for u in units], dtype=np.int64)
        self.u_fb = np.array([u.fb_total_mib for u in units], dtype=np.float64)
        share = np.array([u.compute_share for u in units], dtype=np.float64)
        models = [hosts[u.host].model for u in units]
        self.u_share = share
        self.u_tdp = np.array([m.tdp_w for m in models]) * share
        self.u_idle = np.array([m.idle_w for m in models]) * share
        self.u_sm_max = np.array([m.sm_clock_max_mhz for m in models], dtype=np.float64)
        self.u_sm_idle = np.array([m.sm_clock_idle_mhz for m in models], dtype=np.float64)
        self.u_mem_clock = np.array([m.mem_clock_mhz for m in models], dtype=np.float64)
        self.u_nvlink = np.array([m.nvlink for m in models], dtype=bool)
        self.u_mig = np.array([u.mig_profile is not None for u in units], dtype=bool)
        # FLOP/s of a whole GPU's dense BF16 peak; a MIG slice's SDK reports no FLOPs (0)
        self.u_peak_flops = np.array(
            [
                0.0 if u.mig_profile else m.bf16_dense_tflops * 1e12
                for u, m in zip(units, models, strict=True)
            ]
        )
        idx = np.arange(len(units), dtype=np.int64)
        base = hash_u01(self.seed, idx, 1)
        # Counters since boot: booted 1-60 days before the origin, drawing ~40 % of TDP on average.
        self.u_boot = fleet.origin_s - 86_400 - (base * 59 * 86_400).astype(np.int64)
        self.u_energy_w = np.rint(self.u_tdp * 0.4).astype(np.int64)
        self.u_power_violation = (hash_u01(self.seed, idx, 2) * 5e6).astype(np.int64)
        self.u_thermal_base = (hash_u01(self.seed, idx, 3) * 2e6).astype(np.int64)
        self.u_replay_base = (hash_u01(self.seed, idx, 4) * 3).astype(np.int64)

    def _compile_jobs(self) -> None:
        jobs = self.fleet.jobs
        n = max(len(jobs), 1)
        lvl = _LEVEL_INDEX

        def ints(values: list[int]) -> I64:
            out = np.zeros(n, dtype=np.int64)
            out[: len(values)] = values
            return out

        def floats(values: list[float]) -> F64:
            out = np.zeros(n, dtype=np.float64)
            out[: len(values)] = values
            return out

        def flags(values: list[bool]) -> B:
            out = np.zeros(n, dtype=bool)
            out[: len(values)] = values
            return out

        sc = [j.scenario for j in jobs]
        self.j_start = ints([j.start_s for j in jobs])
        self.j_end = ints([j.end_s for j in jobs])
        self.j_main = ints([lvl[s.main.name] for s in sc])
        self.j_odd = ints([lvl[s.odd_rank.name] if s.odd_rank else -1 for s in sc])
        self.j_lead = ints([s.lead_s for s in sc])
        self.j_lead_level = ints([lvl[s.lead.name] for s in sc])
        self.j_tail = ints([s.tail_s for s in sc])
        alts = [s.alternation for s in sc]
        self.j_alt_mode = ints(
            [
                1 if isinstance(a, RandomBlocks) else 2 if isinstance(a, Periodic) else 0
                for a in alts
            ]
        )
        self.j_alt_level = ints([lvl[a.level.name] if a else 0 for a in alts])
        self.j_alt_share = floats([a.share if a else 0.0 for a in alts])
        self.j_alt_block = ints([a.block_s if isinstance(a, RandomBlocks) else 1 for a in alts])
        self.j_alt_period = ints([a.period_s if isinstance(a, Periodic) else 1 for a in alts])
        self.j_alt_len = ints([a.alt_s if isinstance(a, Periodic) else 0 for a in alts])
        thr = [s.throttle for s in sc]
        self.j_thr = flags([t is not None for t in thr])
        self.j_thr_period = ints([t.period_s if t else 1 for t in thr])
        self.j_thr_len = ints([t.throttled_s if t else 0 for t in thr])
        self.j_thr_clock = floats([t.sm_clock_mhz if t else 0 for t in thr])
        self.j_thr_temp = floats([t.temp_c if t else 0 for t in thr])
        xid = [s.xid for s in sc]
        self.j_xid_code = ints([x.code if x else 0 for x in xid])
        self.j_xid_lead = ints([x.replay_lead_s if x else 0 for x in xid])
        self.j_xid_every = ints([x.replay_every_s if x else 1 for x in xid])
        self.j_creep = floats([s.creep.growth_frac if s.creep else 0.0 for s in sc])
        self.j_prof = flags([s.profiling for s in sc])
        self.j_multi = flags([j.n_gpus > 1 for j in jobs])
        self.j_seed = np.array(
            [stable_seed(self.fleet.spec.seed, "job", j.index) for j in jobs] or [0],
            dtype=np.uint64,
        )

    def _compile_segments(self) -> None:
        rows: list[tuple[int, int, int, int, int]] = []
        self.seg_pod: list[str | None] = []
        for job in self.fleet.jobs:
            offset = 0  # ranks run across the hosts of a job; a moved job restarts at 0
            for placement in job.placements:
                for rank, unit in enumerate(placement.units, start=offset):
                    rows.append((unit, placement.start_s, placement.end_s, job.index, rank))
                offset = 0 if job.scenario.moves else offset + len(placement.units)
        order = sorted(range(len(rows)), key=lambda i: (rows[i][0], rows[i][1]))
        table = np.array([rows[i] for i in order], dtype=np.int64).reshape(-1, 5)
        pods = {
            (job.index, unit): placement.pod
            for job in self.fleet.jobs
            for placement in job.placements
            for unit in placement.units
        }
        self.s_unit, self.s_start, self.s_end, self.s_job, self.s_rank = (
            table[:, k].copy() for k in range(5)
        )
        self.seg_pod = [
            pods[(int(j), int(u))] for j, u in zip(self.s_job, self.s_unit, strict=True)
        ]
        self.s_key = self.s_unit * _KEY_SPAN + self.s_start
        # Counters carried from earlier segments on the same unit.
        self.s_before: dict[str, I64] = {}
        for name, counter in self._counters().items():
            total = counter(self.s_job, self.s_rank, self.s_end) - counter(
                self.s_job, self.s_rank, self.s_start
            )
            cumulative = np.cumsum(total) - total
            first = np.searchsorted(self.s_unit, self.s_unit, side="left")
            self.s_before[name] = cumulative - cumulative[first]

    # -- per-job counters (seconds or events since the job began, at time t) ------------------
    def _counters(self) -> dict[str, Callable[[I64, I64, I64], I64]]:
        return {
            "thermal_violation_us": self._throttled_us,
            "pcie_replay_total": self._replays,
            "ecc_dbe_total": self._dbe,
        }

    def _main_window(self, job: I64) -> tuple[I64, I64]:
        begin = self.j_start[job] + self.j_lead[job]
        return begin, self.j_end[job] - self.j_tail[job]

    def _throttled_us(self, job: I64, rank: I64, t: I64) -> I64:
        begin, end = self._main_window(job)
        rel = np.clip(np.minimum(t, end) - begin, 0, None)
        period, length = self.j_thr_period[job], self.j_thr_len[job]
        seconds = (rel // period) * length + np.minimum(rel % period, length)
        return np.where(self.j_thr[job], seconds * 1_000_000, 0).astype(np.int64)

    def _replays(self, job: I64, rank: I64, t: I64) -> I64:
        fault = self.j_end[job] - self.j_tail[job]
        lead = self.j_xid_lead[job]
        window = np.clip(t - (fault - lead), 0, lead)
        replays = np.where(
            (self.j_xid_code[job] > 0) & (rank == 0), window // self.j_xid_every[job], 0
        )
        return replays.astype(np.int64)

    def _dbe(self, job: I64, rank: I64, t: I64) -> I64:
        fault = self.j_end[job] - self.j_tail[job]
        faulted: B = (self.j_xid_code[job] > 0) & (rank == 0) & (t >= fault)
        return faulted.astype(np.int64)

    # -- evaluation ---------------------------------------------------------------------------
    def lookup(self, unit: I64, t: I64) -> tuple[I64, B]:
        """The last segment of each unit starting at or before t (-1: none), and whether t is in it."""
        if len(self.s_key) == 0:
            return np.full(unit.shape, -1, dtype=np.int64), np.zeros(unit.shape, dtype=bool)
        seg = np.searchsorted(self.s_key, unit * _KEY_SPAN + t, side="right") - 1
        safe = np.maximum(seg, 0)
        found = (seg >= 0) & (self.s_unit[safe] == unit)
        seg = np.where(found, seg, -1)
        allocated = found & (t < self.s_end[safe])
        return seg, allocated

    def _allocation(self, unit: I64, t: I64) -> tuple[I64, I64, I64, B, I64, I64]:
        """(unit, t, segment, allocated, job, rank) of each (unit[i], t[i])."""
        unit = np.asarray(unit, dtype=np.int64)
        t = np.asarray(t, dtype=np.int64)
        seg, alloc = self.lookup(unit, t)
        safe_seg = np.maximum(seg, 0)
        job = np.where(alloc, self.s_job[safe_seg], 0)
        rank = np.where(alloc, self.s_rank[safe_seg], -1)
        return unit, t, seg, alloc, job, rank

    def levels(self, unit: I64, t: I64) -> tuple[B, I64]:
        """Whether each (unit[i], t[i]) is allocated, and its level: `evaluate` without the
        exporter values, for the host's CPU load (node.py)."""
        _, t, _, alloc, job, rank = self._allocation(unit, t)
        level, _ = self._levels_at(job, rank, t, alloc)
        return alloc, level

    def evaluate(self, unit: I64, t: I64) -> Frame:
        """Every exporter value for each (unit[i], t[i]); t in whole seconds."""
        unit, t, seg, alloc, job, rank = self._allocation(unit, t)
        level, throttled = self._levels_at(job, rank, t, alloc)
        values = self._values(unit, t, seg, alloc, job, rank, level, throttled)
        return Frame(unit, t, seg, alloc, np.where(alloc, job, -1), rank, level, values)

    def _in_random_blocks(self, job: I64, rel: I64) -> B:
        """Random blocks, stratified: exactly round(share x 20) of every 20 consecutive blocks.

        A job's blocks are grouped in windows of _WINDOW; within each window an affine
        permutation (multiplier coprime with _WINDOW, offset from the window's hash) picks
        which positions run at the alternate level. Plain Bernoulli blocks would let a short
        job's share drift several points from the designed one.
        """
        block = rel // self.j_alt_block[job]
        window, position = block // _WINDOW, block % _WINDOW
        h = splitmix64(self.j_seed[job] ^ window.astype(np.uint64))
        multiplier = _COPRIME[(h % np.uint64(len(_COPRIME))).astype(np.int64)]
        offset = ((h >> np.uint64(8)) % np.uint64(_WINDOW)).astype(np.int64)
        slot = (position * multiplier + offset) % _WINDOW
        return slot < np.rint(self.j_alt_share[job] * _WINDOW)

    def _levels_at(self, job: I64, rank: I64, t: I64, alloc: B) -> tuple[I64, B]:
        rel = t - self.j_start[job]
        duration = self.j_end[job] - self.j_start[job]
        lead = self.j_lead[job]
        level = np.where((rank == 0) & (self.j_odd[job] >= 0), self.j_odd[job], self.j_main[job])
        mode = self.j_alt_mode[job]
        starved = (mode == 1) & self._in_random_blocks(job, rel)
        period = self.j_alt_period[job]
        in_alt = (mode == 2) & ((rel - lead) % period >= period - self.j_alt_len[job])
        level = np.where(starved | in_alt, self.j_alt_level[job], level)
        main = (rel >= lead) & (rel < duration - self.j_tail[job])
        level = np.where(rel < lead, self.j_lead_level[job], level)
        level = np.where(rel >= duration - self.j_tail[job], _LEVEL_INDEX[CRASHED.name], level)
        level = np.where(alloc, level, _LEVEL_INDEX[FREE.name]).astype(np.int64)
        thr_phase = (rel - lead) % self.j_thr_period[job] < self.j_thr_len[job]
        throttled = alloc & self.j_thr[job] & main & thr_phase
        return level, throttled

    def _values(
        self, unit: I64, t: I64, seg: I64, alloc: B, job: I64, rank: I64, level: I64, thr: B
    ) -> dict[str, F64]:
        lv = {name: column[level] for name, column in self._levels.items()}
        base = unit.astype(np.uint64) << np.uint64(36) ^ t.astype(np.uint64) ^ self.seed
        noise = _noise_streams(base, 20)

        def jitter(k: int, amplitude: float = _NOISE) -> F64:
            return 1.0 + amplitude * (2.0 * noise[k] - 1.0)

        def ratio(name: str, k: int) -> F64:
            return exact_f(np.clip(lv[name] * jitter(k), 0.0, 1.0))

        fb_total = self.u_fb[unit]
        fb_frac = lv["fb_frac"] + np.where(alloc, self._creep(job, t), 0.0)
        util = np.clip(np.rint(lv["util_pct"] * jitter(0)), 0.0, 100.0)
        gr = exact_f(np.clip(lv["util_pct"] / 100.0 * jitter(1), 0.0, 1.0))
        sm = ratio("sm_active", 2)
        dram = ratio("dram_active", 5)
        nvlink = lv["nvlink_gbs"] * 1e9 * (self.j_multi[job] & alloc & self.u_nvlink[unit])
        fb_used = np.rint(fb_frac * fb_total * jitter(13, 0.002))
        load = np.clip(0.15 * gr + 0.55 * sm + 0.3 * dram, 0.0, 1.0)
        idle_w, tdp_w = self.u_idle[unit], self.u_tdp[unit]
        power = exact_f((idle_w + (tdp_w - idle_w) * load) * jitter(15, 0.01))
        temp = np.rint(30.0 + 0.075 * power / self.u_share[unit])
        temp = np.where(thr, self.j_thr_temp[job] + np.rint(2.0 * noise[16]), temp)
        sm_clock = np.where(gr > 0.02, self.u_sm_max[unit], self.u_sm_idle[unit])
        sm_clock = np.where(
            thr, self.j_thr_clock[job] + np.rint(30.0 * (noise[17] - 0.5)), sm_clock
        )
        reasons = np.where(thr, _REASON_THERMAL, np.where(lv["util_pct"] == 0, _REASON_GPU_IDLE, 0))
        fault = self.j_end[job] - self.j_tail[job]
        xid = np.where(
            alloc & (self.j_xid_code[job] > 0) & (rank == 0) & (t >= fault), self.j_xid_code[job], 0
        )
        values: dict[str, F64] = {
            "sm_clock_mhz": sm_clock,
            "mem_clock_mhz": self.u_mem_clock[unit],
            "clocks_event_reasons": reasons.astype(np.float64),
            "temp_c": temp,
            "power_w": power,
            "energy_mj": ((t - self.u_boot[unit]) * self.u_energy_w[unit] * 1000).astype(
                np.float64
            ),
            "gpu_util": np.where(self.u_mig[unit], np.nan, util),
            "mem_copy_util": np.clip(np.rint(lv["dram_active"] * 100.0 * jitter(14)), 0.0, 100.0),
            "fb_free_mib": fb_total - fb_used,
            "fb_used_mib": fb_used,
            "xid_last": xid.astype(np.float64),
            "power_violation_us": self.u_power_violation[unit].astype(np.float64),
            "gr_engine_active": gr,
            "sm_active": sm,
            "sm_occupancy": ratio("sm_occupancy", 3),
            "tensor_active": ratio("tensor_active", 4),
            "dram_active": dram,
            "fp64_active": ratio("fp64_active", 6),
            "fp32_active": ratio("fp32_active", 7),
            "fp16_active": ratio("fp16_active", 8),
            "pcie_tx_bytes_s": exact_f(lv["pcie_tx_gbs"] * 1e9 * jitter(9)),
            "pcie_rx_bytes_s": exact_f(lv["pcie_rx_gbs"] * 1e9 * jitter(10)),
            "nvlink_tx_bytes_s": exact_f(nvlink * jitter(11)),
            "nvlink_rx_bytes_s": exact_f(nvlink * jitter(12)),
        }
        safe_seg = np.maximum(seg, 0)
        seg_job = self.s_job[safe_seg]
        seg_rank = self.s_rank[safe_seg]
        bases = {
            "thermal_violation_us": self.u_thermal_base,
            "pcie_replay_total": self.u_replay_base,
            "ecc_dbe_total": np.zeros_like(self.u_replay_base),
        }
        for name, counter in self._counters().items():
            within = counter(seg_job, seg_rank, np.minimum(t, self.s_end[safe_seg])) - counter(
                seg_job, seg_rank, self.s_start[safe_seg]
            )
            carried = np.where(seg >= 0, self.s_before[name][safe_seg] + within, 0)
            values[name] = (bases[name][unit] + carried).astype(np.float64)
        paused = alloc & ~self.j_prof[job]
        for field in EXPORTER_FIELDS:
            if field.profiling:
                values[field.key] = np.where(paused, np.nan, values[field.key])
        return values

    def _creep(self, job: I64, t: I64) -> F64:
        """Framebuffer fraction a leaking job has added by t: linear over its main phase."""
        begin, end = self._main_window(job)
        span = np.maximum(end - begin, 1)
        done = np.clip((t - begin) / span, 0.0, 1.0)
        return np.where((t >= begin) & (t < end), self.j_creep[job] * done, 0.0)

    def cpu_pct(self, level: I64) -> F64:
        return self._levels["cpu_pct"][level]

    def iowait_pct(self, level: I64) -> F64:
        return self._levels["iowait_pct"][level]

    def training(self, level: I64) -> B:
        return self._levels["training"][level] > 0


def _noise_streams(base: U64, count: int) -> list[F64]:
    """`count` uniform [0, 1) streams, four 16-bit draws from each 64-bit hash."""
    streams: list[F64] = []
    with np.errstate(over="ignore"):
        for k in range((count + 3) // 4):
            h = splitmix64(base + np.uint64(k) * _GOLDEN)
            for shift in (0, 16, 32, 48):
                bits = (h >> np.uint64(shift)) & np.uint64(0xFFFF)
                streams.append(bits.astype(np.float64) * (1.0 / 65536.0))
    return streams[:count]
