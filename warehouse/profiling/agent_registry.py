"""What each polling agent last said about the instrumented training processes on its host.

What it is for: matching profile requests to processes, accepting a request for a job the catalog
has not seen yet but an agent reports, and saying exactly what was seen when nothing matched
("agents polling: host-a (jobs: x[ranks 0,1]), host-b (no instrumented processes)"); dynolog's
bare "No processes were matched" leaves users unable to tell a wrong job id from a stopped
process (facebookincubator/dynolog issues #280, #265).

In memory, per server process: a restarted server knows every agent again after one poll
interval. Must never touch the catalog or the network.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ReportedProcess:
    """One instrumented training process as an agent reported it."""

    pid: int
    job_id: str | None
    rank: int | None


@dataclass(frozen=True)
class AgentSeen:
    host: str
    last_poll: float
    processes: tuple[ReportedProcess, ...]


class AgentRegistry:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._agents: dict[str, AgentSeen] = {}
        self._lock = threading.Lock()

    def record(self, host: str, processes: tuple[ReportedProcess, ...]) -> AgentSeen:
        seen = AgentSeen(host, self._clock(), processes)
        with self._lock:
            self._agents[host] = seen
        return seen

    def recent(self, since: float) -> list[AgentSeen]:
        """Agents whose last poll is at or after `since` (Unix s), by host name."""
        with self._lock:
            return sorted(
                (a for a in self._agents.values() if a.last_poll >= since), key=lambda a: a.host
            )

    def reports_job(self, job_id: str, since: float) -> bool:
        return any(p.job_id == job_id for a in self.recent(since) for p in a.processes)


def describe_agents(agents: list[AgentSeen]) -> str:
    """'host-a (jobs: x[ranks 0,1], y), host-b (no instrumented processes)'."""
    parts = []
    for agent in agents:
        ranks: dict[str, set[int]] = {}
        for process in agent.processes:
            found = ranks.setdefault(process.job_id or "(no job id)", set())
            if process.rank is not None:
                found.add(process.rank)
        if not ranks:
            parts.append(f"{agent.host} (no instrumented processes)")
            continue
        jobs = [
            f"{job}[ranks {','.join(map(str, sorted(r)))}]" if r else job
            for job, r in sorted(ranks.items())
        ]
        parts.append(f"{agent.host} (jobs: {', '.join(jobs)})")
    return ", ".join(parts)
