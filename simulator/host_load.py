"""The whole-host CPU load of each simulated host, second by second, and its running sums.

What it is for: node_exporter's counters (CPU seconds per mode, bytes over the network and to
disk) are integrals of the load since boot, so the node page (node_page.py) needs the sum of the
load over every second up to the scraped one. The load of one second is batch.py's whole-host
row: each GPU's share of the host's cores busy at its job's level (levels.py `cpu_pct`, free GPUs'
cores idle) plus a 1 % floor, and the I/O wait likewise from `iowait_pct`. Before the fleet's
origin every host ran at that idle floor, so sums before the origin are a closed form; after it
they are memoized per host and extended on demand, one vectorized evaluation per extension, so a
scrape every few seconds costs a few seconds' evaluation. Everything is a function of the fleet
(its seed) and the second asked for: the same fleet gives the same numbers in any order of calls.

Must never: read the clock, or depend on which seconds were asked for before.
"""

from __future__ import annotations

import threading
from typing import Final

import numpy as np
import numpy.typing as npt

from simulator.fleet import Fleet, Host
from simulator.model import stable_seed
from simulator.signals import SignalModel

__all__ = ["IDLE_CPU_PCT", "HostLoad", "boot_s"]

F64 = npt.NDArray[np.float64]

IDLE_CPU_PCT: Final = 1.0  # batch.py: the whole host's floor (system daemons, the agent)
_CHUNK_S: Final = 86_400  # seconds evaluated per call, to bound memory
_GRID: Final = 1024.0


def boot_s(fleet: Fleet, host: Host) -> int:
    """When the host booted: 2 to 42 days before the fleet's origin, fixed per seed and host."""
    draw = stable_seed(fleet.spec.seed, "boot", host.name)
    return fleet.origin_s - 86_400 * (2 + draw % 40) - (draw >> 8) % 86_400


class _Sums:
    """Running sums since the origin for one host: row k holds the sums over [origin, origin+k).
    Grown by doubling, so extending second by second costs amortized constant copying."""

    def __init__(self) -> None:
        self.rows: F64 = np.zeros((1024, 2))
        self.filled = 1  # row 0: nothing summed yet
        self.lock = threading.Lock()

    def extend(self, cpu: F64, io: F64) -> None:
        need = self.filled + len(cpu)
        if need > len(self.rows):
            grown = np.zeros((max(need, 2 * len(self.rows)), 2))
            grown[: self.filled] = self.rows[: self.filled]
            self.rows = grown
        last = self.rows[self.filled - 1]
        self.rows[self.filled : need, 0] = last[0] + np.cumsum(cpu)
        self.rows[self.filled : need, 1] = last[1] + np.cumsum(io)
        self.filled = need


class HostLoad:
    def __init__(self, signals: SignalModel) -> None:
        self.signals = signals
        fleet = signals.fleet
        self.origin_s = fleet.origin_s
        self._units = {
            host.index: np.array([u.index for u in fleet.units if u.host == host.index])
            for host in fleet.hosts
        }
        self.idle_iowait_pct = float(signals.iowait_pct(np.zeros(1, dtype=np.int64))[0])
        self._sums = {host.index: _Sums() for host in fleet.hosts}

    def percent(self, host: Host, t0: int, t1: int) -> tuple[F64, F64]:
        """The host's CPU busy and I/O wait percent (of all its cores) for each second of [t0, t1)."""
        units = self._units[host.index]
        seconds = np.arange(t0, t1, dtype=np.int64)
        unit = np.repeat(units, len(seconds))
        t = np.tile(seconds, len(units))
        alloc, level = self.signals.levels(unit, t)
        cpu = np.where(alloc, self.signals.cpu_pct(level), 0.0).reshape(len(units), -1)
        io = np.where(alloc, self.signals.iowait_pct(level) - self.idle_iowait_pct, 0.0)
        io = io.reshape(len(units), -1)
        # On a 1/1024 grid, so that every running sum is exact whichever chunks built it.
        return (
            np.round((cpu.mean(axis=0) + IDLE_CPU_PCT) * _GRID) / _GRID,
            np.round((io.mean(axis=0) + self.idle_iowait_pct) * _GRID) / _GRID,
        )

    def sums(self, host: Host, t: int) -> tuple[float, float]:
        """Sums of the CPU and I/O wait percents over the seconds [origin, t) (negative before
        the origin: the idle percents times the seconds before it)."""
        if t <= self.origin_s:
            before = t - self.origin_s
            return IDLE_CPU_PCT * before, self.idle_iowait_pct * before
        sums = self._sums[host.index]
        k = t - self.origin_s
        with sums.lock:
            while sums.filled <= k:
                done = sums.filled - 1
                upto = min(k, done + _CHUNK_S)
                cpu, io = self.percent(host, self.origin_s + done, self.origin_s + upto)
                sums.extend(cpu, io)
            return float(sums.rows[k, 0]), float(sums.rows[k, 1])
