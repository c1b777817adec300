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
