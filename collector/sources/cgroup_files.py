"""What both cgroup readers share: the per-job reading and the parsers of cgroup files (CPU lists,
keyed counters, numbers with "max"). Its own module so the v1 reader (cgroups_v1.py) does not
import the v2 reader (cgroups.py) that falls back to it: no import cycle.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CgroupReading:
    job_id: str
    usage_usec: float | None
    user_usec: float | None
    system_usec: float | None
    mem_current_bytes: float | None
    mem_max_bytes: float | None
    io_read_bytes: float | None
    io_write_bytes: float | None
    allowed_cores: float | None = None  # fewest of the cpuset's CPUs and the cpu.max quota


def _cpu_list_size(text: str | None) -> int | None:
    """CPUs in a cgroup CPU list ("0-3,8,10-11" -> 7); None when absent or unreadable."""
    if text is None or not text.strip():
        return None
    total = 0
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        try:
            total += (int(hi) if hi else int(lo)) - int(lo) + 1
        except ValueError:
            return None
    return total or None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _keyed(text: str | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) == 2:
            with contextlib.suppress(ValueError):
                out[parts[0]] = float(parts[1])
    return out


def _number(text: str | None) -> float | None:
    if text is None or text.strip() in ("", "max"):
        return None
    try:
        return float(text.strip())
    except ValueError:
        return None
