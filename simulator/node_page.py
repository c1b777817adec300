"""node_exporter `/metrics` pages for a simulated GPU host, byte for byte in node_exporter's format.

What it is for: the host side of a simulated host (CPU, memory, network, disk, load), served next
to its dcgm-exporter page so that an agent with `agent.node_exporter_url` reads the simulated host
rather than the machine the simulator runs on. The layout is node_exporter 1.x's (client_golang's
registry, text format 0.0.4), checked against its fixture in tests/data/node_exporter/: families
sorted by name, each a `# HELP` and a `# TYPE` line, then its samples sorted by label values as
strings (so cpu="0", "1", "10", ... "19", "2"), labels in the collector's order (cpu, mode;
device), values as Go's strconv.FormatFloat(v, 'g', -1, 64) prints them (1.418183276e+09,
303104, 0.21), one final newline. Only the families the collector reads, plus the boot time and
the 5 and 15 minute loads node_exporter prints with node_load1.

The values (all from host_load.py's per-second load, as batch.py's whole-host rows have them):
CPU seconds in USER_HZ ticks (1/100 s, as /proc/stat counts them) per mode, user 90 % and system
10 % of the busy share, iowait its own share, a constant 0.2 % softirq and 0.01 % nice, idle the
rest; spread evenly over the logical CPUs. Memory used `total x (0.15 + 0.004 x busy %)` in whole
kB; network and disk bytes the integral of batch.py's rates (2.5 MB/s received, 1 MB/s sent,
4 MB/s read, 0.5 MB/s written per busy percent), `lo` a constant 15 kB/s each way; loads the mean
busy cores over the last 1, 5 and 15 minutes.

Must never: compute the load (host_load.py) or touch the network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from simulator.hardware import HostModel

__all__ = ["HostCounters", "go_float", "render_node_page"]

USER_HZ: Final = 100  # /proc/stat ticks per second
MODES: Final = ("idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user")
SOFTIRQ_SHARE: Final = 0.002
NICE_SHARE: Final = 0.0001
LO_BYTES_S: Final = 15_000.0
# bytes per second per busy percent (batch.py's host rows)
RX_PER_PCT: Final = 2.5e6
TX_PER_PCT: Final = 1.0e6
READ_PER_PCT: Final = 4.0e6
WRITE_PER_PCT: Final = 0.5e6


@dataclass(frozen=True)
class HostCounters:
    """One host at one second: its boot time and load sums since boot (percent x seconds)."""

    t: int
    boot_s: int
    cpu_pct_s: float  # sum over the seconds since boot of the busy percent of all cores
    iowait_pct_s: float
    cpu_pct: float  # busy percent at this second
    load_cpu_pct: tuple[float, float, float]  # mean busy percent over the last 1, 5, 15 min


def go_float(value: float) -> str:
    """A float as Go's expfmt writes it: strconv 'g' with the shortest digits, exponent form
    when the decimal exponent is below -4 or at least 6 (shortest precision uses 6)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits))
    exp10 = len(digits) + exponent - 1
    minus = "-" if sign else ""
    if exp10 < -4 or exp10 >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{minus}{mantissa}e{'-' if exp10 < 0 else '+'}{abs(exp10):02d}"
    return minus + format(Decimal(repr(abs(value))).normalize(), "f")


def _family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> list[str]:
    return [
        f"# HELP {name} {help_text}",
        f"# TYPE {name} {kind}",
        *(f"{name}{labels} {go_float(value)}" for labels, value in samples),
    ]


def _mode_ticks(model: HostModel, c: HostCounters) -> dict[str, int]:
    """Ticks of all CPUs together per mode since boot."""
    n = model.logical_cpus
    elapsed_s = c.t - c.boot_s
    busy = {
        "user": math.floor(0.9 * n * c.cpu_pct_s),
        "system": math.floor(0.1 * n * c.cpu_pct_s),
        "iowait": math.floor(n * c.iowait_pct_s),
        "softirq": math.floor(n * USER_HZ * SOFTIRQ_SHARE * elapsed_s),
        "nice": math.floor(n * USER_HZ * NICE_SHARE * elapsed_s),
        "irq": 0,
        "steal": 0,
    }
    busy["idle"] = max(0, n * USER_HZ * elapsed_s - sum(busy.values()))
    return busy


def _cpu_samples(model: HostModel, c: HostCounters) -> list[tuple[str, float]]:
    n = model.logical_cpus
    ticks = _mode_ticks(model, c)
    samples = []
    for cpu in sorted(str(i) for i in range(n)):
        for mode in MODES:
            whole, rest = divmod(ticks[mode], n)
            samples.append(
                (f'{{cpu="{cpu}",mode="{mode}"}}', (whole + (int(cpu) < rest)) / USER_HZ)
            )
    return samples


def render_node_page(model: HostModel, c: HostCounters) -> str:
    """The node_exporter page of a host of `model` with counters `c`."""
    n = model.logical_cpus
    elapsed_s = c.t - c.boot_s
    used = model.mem_total_bytes * (0.15 + 0.004 * c.cpu_pct)
    available = (model.mem_total_bytes - math.ceil(used / 1024) * 1024) // 1024 * 1024
    nic, lo = f'{{device="{model.nic}"}}', '{device="lo"}'
    disk = f'{{device="{model.disk}"}}'
    lo_bytes = float(round(LO_BYTES_S * elapsed_s))

    def sectors(per_pct: float) -> float:
        return float(math.floor(per_pct * c.cpu_pct_s / 512) * 512)

    def load(pct: float) -> list[tuple[str, float]]:
        return [("", round(n * pct / 100.0, 2))]

    lines = [
        *_family(
            "node_boot_time_seconds", "gauge", "Node boot time, in unixtime.", [("", c.boot_s)]
        ),
        *_family(
            "node_cpu_seconds_total",
            "counter",
            "Seconds the CPUs spent in each mode.",
            _cpu_samples(model, c),
        ),
        *_family(
            "node_disk_read_bytes_total",
            "counter",
            "The total number of bytes read successfully.",
            [(disk, sectors(READ_PER_PCT))],
        ),
        *_family(
            "node_disk_written_bytes_total",
            "counter",
            "The total number of bytes written successfully.",
            [(disk, sectors(WRITE_PER_PCT))],
        ),
        *_family("node_load1", "gauge", "1m load average.", load(c.load_cpu_pct[0])),
        *_family("node_load15", "gauge", "15m load average.", load(c.load_cpu_pct[2])),
        *_family("node_load5", "gauge", "5m load average.", load(c.load_cpu_pct[1])),
        *_family(
            "node_memory_MemAvailable_bytes",
            "gauge",
            "Memory information field MemAvailable_bytes.",
            [("", float(available))],
        ),
        *_family(
            "node_memory_MemTotal_bytes",
            "gauge",
            "Memory information field MemTotal_bytes.",
            [("", float(model.mem_total_bytes))],
        ),
        *_family(
            "node_network_receive_bytes_total",
            "counter",
            "Network device statistic receive_bytes.",
            [(nic, float(round(RX_PER_PCT * c.cpu_pct_s))), (lo, lo_bytes)],
        ),
        *_family(
            "node_network_transmit_bytes_total",
            "counter",
            "Network device statistic transmit_bytes.",
            [(nic, float(round(TX_PER_PCT * c.cpu_pct_s))), (lo, lo_bytes)],
        ),
    ]
    return "\n".join(lines) + "\n"
