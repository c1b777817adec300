"""What each polling agent last reported (fleet mode): the profiling registry shared by gateways.

Why in the catalog: an agent's poll lands on any gateway, and a profile request created through
another must still match its processes and say which agents were seen. One row per host, replaced
on each poll. The embedded server keeps the same facts in memory (warehouse.profiling.agent_registry).
"""

from __future__ import annotations

from sqlalchemy import JSON, Column, Connection, Float, String, Table, select

from warehouse.catalog.base import metadata, upsert

agent_polls = Table(
    "agent_polls",
    metadata,
    Column("host", String(255), primary_key=True),
    Column("last_poll", Float, nullable=False),  # Unix seconds, the registry's clock
    Column("processes", JSON, nullable=False),  # [[pid, job_id, rank], ...]
)


def record_poll(
    conn: Connection, host: str, last_poll: float, processes: list[list[object]]
) -> None:
    upsert(
        conn,
        agent_polls,
        [{"host": host, "last_poll": last_poll, "processes": processes}],
        keys=["host"],
        update={"last_poll": "replace", "processes": "replace"},
    )


def polls_since(conn: Connection, since: float) -> list[tuple[str, float, list[list[object]]]]:
    rows = conn.execute(
        select(agent_polls.c.host, agent_polls.c.last_poll, agent_polls.c.processes)
        .where(agent_polls.c.last_poll >= since)
        .order_by(agent_polls.c.host)
    ).all()
    return [(str(h), float(t), list(p)) for h, t, p in rows]
