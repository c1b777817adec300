"""The writer's commit hook that keeps the catalog's hosts and GPU allocations current.

After each commit it derives, from the committed Arrow tables only (no database read): every host
seen (first/last sample time, cluster, the agent's version and last batch id) and every GPU
allocation seen in gpu_samples' job_id (first/last sample time per job, host and GPU index). It
runs on the writer thread before the batch requests are answered, so a 202 means the catalog knows
the host too; its failures are logged, never turned into a refused batch. This module must never
write telemetry.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from sqlalchemy import Engine

from warehouse.catalog.fleet import (
    Allocation,
    HostSeen,
    Job,
    fill_job_owners,
    record_allocations,
    record_hosts,
)
from warehouse.storage.writer import Commit

# A host's last_seen and an allocation's last_ts are refreshed at most this often: the catalog
# answers "which jobs ran where, roughly when"; the exact times are in the telemetry. Without it a
# busy server upserts every host and GPU on every flush (about 80 ms per 20k-row flush on SQLite).
REFRESH_S = 60.0
_CACHE_LIMIT = 200_000
_NEVER = datetime.min.replace(tzinfo=UTC)  # an owner is filled once per job and process


class CatalogSync:
    def __init__(self, engine: Engine, refresh_s: float = REFRESH_S) -> None:
        self._engine = engine
        self._refresh = timedelta(seconds=refresh_s)
        self._written: dict[tuple[str, ...], datetime] = {}

    def __call__(self, commit: Commit) -> None:
        seen_hosts = [h for h in hosts_seen(commit) if self._due(("host", h.host), h.last_seen)]
        seen_allocations = [
            a
            for a in allocations_seen(commit.tables)
            if self._due(("gpu", a.job_id, a.host, str(a.gpu_index)), a.last_ts)
        ]
        owners = [
            o for o in namespace_owners(commit.tables) if self._due(("owner", o.job_id), _NEVER)
        ]
        if not seen_hosts and not seen_allocations and not owners:
            return
        # In key order: fleet gateways upsert the same rows concurrently in PostgreSQL, and two
        # transactions taking row locks in different orders deadlock.
        seen_hosts.sort(key=lambda h: h.host)
        seen_allocations.sort(key=lambda a: (a.job_id, a.host, a.gpu_index))
        owners.sort(key=lambda o: o.job_id)
        with self._engine.begin() as conn:
            record_hosts(conn, seen_hosts)
            record_allocations(conn, seen_allocations)
            fill_job_owners(conn, owners)

    def _due(self, key: tuple[str, ...], last: datetime) -> bool:
        """True when `key` is new or its last time moved `refresh_s` past what was written."""
        written = self._written.get(key)
        if written is not None and written <= last < written + self._refresh:
            return False
        if len(self._written) > _CACHE_LIMIT:
            self._written.clear()
        self._written[key] = max(last, written) if written is not None else last
        return True


def hosts_seen(commit: Commit) -> list[HostSeen]:
    spans: dict[str, tuple[str | None, datetime, datetime]] = {}
    for data in commit.tables.values():
        grouped = data.group_by(["host", "cluster"], use_threads=False).aggregate(
            [("ts", "min"), ("ts", "max")]
        )
        for row in grouped.to_pylist():
            known = spans.get(row["host"])
            first, last = row["ts_min"], row["ts_max"]
            if known is not None:
                first, last = min(first, known[1]), max(last, known[2])
            spans[row["host"]] = (row["cluster"], first, last)
    agents = {t.agent: t for t in commit.tickets}
    seen = []
    for host, (cluster, first, last) in sorted(spans.items()):
        ticket = agents.get(host)
        seen.append(
            HostSeen(
                host=host,
                cluster=cluster,
                first_seen=first,
                last_seen=last,
                agent_version=(ticket.agent_version or None) if ticket else None,
                last_batch_id=ticket.batch_id if ticket else None,
            )
        )
    return seen


def namespace_owners(tables: Mapping[str, pa.Table]) -> list[Job]:
    """Kubernetes jobs' namespace as their team, whatever path the rows came by (agent, import,
    remote_write); the catalog keeps it only where nothing better (pod label, scheduler) is known."""
    gpus = tables.get("gpu_samples")
    if gpus is None or "namespace" not in gpus.column_names:
        return []
    mask = pc.and_(pc.is_valid(gpus.column("job_id")), pc.is_valid(gpus.column("namespace")))
    named = gpus.filter(mask).select(["job_id", "namespace"])
    if named.num_rows == 0:
        return []
    grouped = named.group_by(["job_id"], use_threads=False).aggregate([("namespace", "last")])
    return [
        Job(job_id=row["job_id"], team=row["namespace_last"], scheduler="k8s")
        for row in grouped.to_pylist()
        if row["namespace_last"]
    ]


def allocations_seen(tables: Mapping[str, pa.Table]) -> list[Allocation]:
    gpus = tables.get("gpu_samples")
    if gpus is None:
        return []
    allocated = gpus.filter(pc.is_valid(gpus.column("job_id")))
    if allocated.num_rows == 0:
        return []
    grouped = allocated.group_by(["job_id", "host", "gpu_index"], use_threads=False).aggregate(
        [("ts", "min"), ("ts", "max"), ("gpu_uuid", "last"), ("mig_profile", "last")]
    )
    return [
        Allocation(
            job_id=row["job_id"],
            host=row["host"],
            gpu_index=row["gpu_index"],
            gpu_uuid=row["gpu_uuid_last"],
            mig_profile=row["mig_profile_last"],
            first_ts=row["ts_min"],
            last_ts=row["ts_max"],
        )
        for row in grouped.to_pylist()
    ]
