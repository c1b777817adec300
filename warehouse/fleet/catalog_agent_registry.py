"""The profiling registry on the catalog, so every gateway sees every agent's last poll.

Same interface as warehouse.profiling.agent_registry.AgentRegistry (record, recent, reports_job); the
gateway hands it to its ProfilingService. Must never hold more than one row per host.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Engine

from warehouse.catalog.agents import polls_since, record_poll
from warehouse.profiling.agent_registry import AgentRegistry, AgentSeen, ReportedProcess


class CatalogAgentRegistry(AgentRegistry):
    def __init__(self, engine: Engine, clock: Callable[[], float] = time.time) -> None:
        super().__init__(clock)
        self._engine = engine

    def record(self, host: str, processes: tuple[ReportedProcess, ...]) -> AgentSeen:
        seen = AgentSeen(host, self._clock(), processes)
        with self._engine.begin() as conn:
            record_poll(conn, host, seen.last_poll, [[p.pid, p.job_id, p.rank] for p in processes])
        return seen

    def recent(self, since: float) -> list[AgentSeen]:
        with self._engine.begin() as conn:
            rows = polls_since(conn, since)
        return [
            AgentSeen(
                host,
                last_poll,
                tuple(
                    ReportedProcess(int(str(p[0])), _opt_str(p[1]), _opt_int(p[2])) for p in procs
                ),
            )
            for host, last_poll, procs in rows
        ]


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


def _opt_int(value: object) -> int | None:
    return None if value is None else int(str(value))
