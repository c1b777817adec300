"""Per-second rates from monotonically increasing counters, between two reads.

Must never: report a rate for the first read (no interval yet) or a negative one (a counter reset,
e.g. a restarted exporter or a re-created cgroup): both give None.
"""

from __future__ import annotations


class Rates:
    def __init__(self) -> None:
        self._last: dict[str, tuple[float, float]] = {}  # key -> (t_s, value)

    def rate(self, key: str, t_s: float, value: float | None) -> float | None:
        if value is None:
            self._last.pop(key, None)
            return None
        prev = self._last.get(key)
        self._last[key] = (t_s, value)
        if prev is None or t_s <= prev[0] or value < prev[1]:
            return None
        return (value - prev[1]) / (t_s - prev[0])

    def forget_except(self, keep_prefixes: set[str]) -> None:
        """Drop counters of jobs that ended, so memory stays bounded."""
        self._last = {k: v for k, v in self._last.items() if k.split("|", 1)[0] in keep_prefixes}


def cpu_mode_pcts(now: dict[str, float], prev: dict[str, float]) -> dict[str, float] | None:
    """Percent of CPU time each mode took between two reads of per-mode CPU seconds.

    The total is the sum of per-mode deltas, not the difference of two sums: summed counters
    of a long-running host are large, and subtracting them loses enough precision that a host
    busy in one mode read 100.00000000909495 %. A mode whose counter went back (Linux's iowait
    can) counts as 0, as in psutil.cpu_times_percent. None when no time passed.
    """
    deltas = {mode: max(0.0, value - prev.get(mode, 0.0)) for mode, value in now.items()}
    total = sum(deltas.values())
    if total <= 0:
        return None
    return {mode: min(100.0, 100.0 * delta / total) for mode, delta in deltas.items()}
