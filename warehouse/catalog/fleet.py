"""Hosts, jobs and GPU allocations: who ran what, where, and when.

Hosts and allocations are maintained by the writer from committed samples (an allocation is a
(job, host, GPU index) seen in gpu_samples' job_id, with the first and last sample time); jobs
come from `POST /v1/jobs` or a scheduler import. Records merge: a later, partial job record never
erases fields an earlier one gave. This module must never read telemetry samples itself.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime

from sqlalchemy import Column, Connection, Engine, Integer, String, Table, and_, select

from warehouse.catalog.base import Merge, UTCDateTime, metadata, upsert

hosts = Table(
    "hosts",
    metadata,
    Column("host", String(255), primary_key=True),
    Column("cluster", String(255)),
    Column("first_seen", UTCDateTime, nullable=False),
    Column("last_seen", UTCDateTime, nullable=False),
    Column("agent_version", String(64)),
    Column("last_batch_id", String(64)),
)

jobs = Table(
    "jobs",
    metadata,
    Column("job_id", String(255), primary_key=True),
    Column("cluster", String(255)),
    Column("user", String(255)),
    Column("team", String(255)),
    Column("name", String(1024)),
    Column("model", String(255)),
    Column("scheduler", String(64)),
    Column("start_ts", UTCDateTime),
    Column("end_ts", UTCDateTime),
    Column("gpus", Integer),
)

gpu_allocations = Table(
    "gpu_allocations",
    metadata,
    Column("job_id", String(255), primary_key=True),
    Column("host", String(255), primary_key=True),
    Column("gpu_index", Integer, primary_key=True),
    Column("gpu_uuid", String(64)),
    Column("mig_profile", String(32)),
    Column("first_ts", UTCDateTime, nullable=False),
    Column("last_ts", UTCDateTime, nullable=False),
)


@dataclass(frozen=True)
class HostSeen:
    host: str
    cluster: str | None
    first_seen: datetime
    last_seen: datetime
    agent_version: str | None = None
    last_batch_id: str | None = None


@dataclass(frozen=True)
class Job:
    job_id: str
    cluster: str | None = None
    user: str | None = None
    team: str | None = None
    name: str | None = None
    model: str | None = None
    scheduler: str | None = None
    start_ts: datetime | None = None
    end_ts: datetime | None = None
    gpus: int | None = None


@dataclass(frozen=True)
class Allocation:
    job_id: str
    host: str
    gpu_index: int
    gpu_uuid: str | None
    mig_profile: str | None
    first_ts: datetime
    last_ts: datetime


_HOST_MERGE: dict[str, Merge] = {
    "cluster": "coalesce",
    "first_seen": "least",
    "last_seen": "greatest",
    "agent_version": "coalesce",
    "last_batch_id": "coalesce",
}
_JOB_MERGE: dict[str, Merge] = {c.name: "coalesce" for c in jobs.columns if c.name != "job_id"}
_ALLOCATION_MERGE: dict[str, Merge] = {
    "gpu_uuid": "coalesce",
    "mig_profile": "coalesce",
    "first_ts": "least",
    "last_ts": "greatest",
}


def record_hosts(conn: Connection, seen: Sequence[HostSeen]) -> None:
    upsert(conn, hosts, [asdict(h) for h in seen], ["host"], _HOST_MERGE)


def upsert_jobs(conn: Connection, records: Sequence[Job]) -> None:
    upsert(conn, jobs, [asdict(j) for j in records], ["job_id"], _JOB_MERGE)


def fill_job_owners(conn: Connection, records: Sequence[Job]) -> None:
    """Owners derived from telemetry (a Kubernetes namespace): fill only what nothing else set."""
    merge: dict[str, Merge] = {c.name: "keep" for c in jobs.columns if c.name != "job_id"}
    upsert(conn, jobs, [asdict(j) for j in records], ["job_id"], merge)


def record_allocations(conn: Connection, seen: Sequence[Allocation]) -> None:
    keys = ["job_id", "host", "gpu_index"]
    upsert(conn, gpu_allocations, [asdict(a) for a in seen], keys, _ALLOCATION_MERGE)


def get_job(conn: Connection, job_id: str) -> Job | None:
    row = conn.execute(select(jobs).where(jobs.c.job_id == job_id)).mappings().first()
    return Job(**row) if row else None


def list_jobs(
    conn: Connection, *, start: datetime | None = None, end: datetime | None = None
) -> list[Job]:
    """Jobs whose [start_ts, end_ts] overlaps [start, end] (open ends match everything)."""
    query = select(jobs).order_by(jobs.c.job_id)
    if end is not None:
        query = query.where((jobs.c.start_ts.is_(None)) | (jobs.c.start_ts < end))
    if start is not None:
        query = query.where((jobs.c.end_ts.is_(None)) | (jobs.c.end_ts > start))
    return [Job(**row) for row in conn.execute(query).mappings()]


class HostClusters:
    """host -> the cluster the catalog knows it by, for series that carry no cluster label.

    Read once and re-read at most every `refresh_s` when asked for a host it does not know (the
    remote_write assembler asks once per series, then caches the route)."""

    def __init__(self, engine: Engine, refresh_s: float = 60.0) -> None:
        self._engine = engine
        self._refresh_s = refresh_s
        self._known: dict[str, str] = {}
        self._read_at = float("-inf")

    def __call__(self, host: str) -> str | None:
        if host not in self._known and time.monotonic() - self._read_at >= self._refresh_s:
            with self._engine.connect() as conn:
                rows = conn.execute(select(hosts.c.host, hosts.c.cluster)).all()
            self._known = {h: c for h, c in rows if c}
            self._read_at = time.monotonic()
        return self._known.get(host)


def list_hosts(conn: Connection) -> list[HostSeen]:
    return [HostSeen(**r) for r in conn.execute(select(hosts).order_by(hosts.c.host)).mappings()]


def allocations(
    conn: Connection, *, job_id: str | None = None, host: str | None = None
) -> list[Allocation]:
    query = select(gpu_allocations).order_by(
        gpu_allocations.c.job_id, gpu_allocations.c.host, gpu_allocations.c.gpu_index
    )
    conditions = []
    if job_id is not None:
        conditions.append(gpu_allocations.c.job_id == job_id)
    if host is not None:
        conditions.append(gpu_allocations.c.host == host)
    if conditions:
        query = query.where(and_(*conditions))
    return [Allocation(**r) for r in conn.execute(query).mappings()]
