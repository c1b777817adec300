"""The agent's owner reporter: tells the ingest server who owns each job it sees, once.

On each tick it looks at the attributed readings; for a job it has not reported it derives the
owner (collector.owners): Kubernetes jobs from the exporter's namespace and pod labels through the
`owners.k8s_*_labels` mapping; Slurm jobs from the prolog's record in `agent.slurm_job_dir`. A
worker thread posts them to `POST /v1/jobs` (the catalog's jobs table, which the ranking, reports
and dashboard read), retrying with the shipper's transport until accepted. A record carries only
the fields known, so it never erases what a scheduler import told the catalog.

Must never: block the tick on the network, or report a job twice after it was accepted.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from collector.http import Transport
from collector.owners import Owner, k8s_owner, read_job_record
from fleetscope.errors import SourceUnavailableError
from fleetscope.normalize import GpuReading
from fleetscope.settings import Settings

log = logging.getLogger(__name__)

_MAX_KNOWN = 100_000


# A prolog writes its record when the job starts; an agent that scraped first looks again this
# much later (the owner reaches the catalog a few seconds late, never not at all).
UNOWNED_RETRY_S = 10.0
_UNOWNED_LIMIT = 100_000


class OwnerReporter:
    def __init__(
        self,
        *,
        ingest_url: str,
        token: str,
        transport: Transport,
        slurm_job_dir: Path | None,
        team_labels: Sequence[str] = ("team",),
        user_labels: Sequence[str] = ("user",),
        project_labels: Sequence[str] = ("project",),
        timeout_s: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url = ingest_url.rstrip("/") + "/v1/jobs"
        self.token = token
        self.transport = transport
        self.slurm_job_dir = slurm_job_dir
        self.labels = (tuple(team_labels), tuple(user_labels), tuple(project_labels))
        self.timeout_s = timeout_s
        self.wakeup = threading.Event()
        self._lock = threading.Lock()
        self._pending: dict[str, Owner] = {}
        self._known: set[str] = set()
        # job id -> when to look again: a job with no owner yet (no prolog record) was re-read
        # for each of its GPUs on every tick, ~9 % of the agent's CPU at 1 Hz (bench/RESULTS.md)
        self._unowned: dict[str, float] = {}
        self._monotonic = monotonic

    @classmethod
    def from_settings(cls, settings: Settings, transport: Transport) -> OwnerReporter:
        def names(listed: str) -> tuple[str, ...]:
            return tuple(n.strip() for n in listed.split(",") if n.strip())

        job_dir = settings.agent.slurm_job_dir
        return cls(
            ingest_url=settings.agent.ingest_url,
            token=settings.agent.token,
            transport=transport,
            slurm_job_dir=Path(job_dir) if job_dir else None,
            team_labels=names(settings.owners.k8s_team_labels),
            user_labels=names(settings.owners.k8s_user_labels),
            project_labels=names(settings.owners.k8s_project_labels),
            timeout_s=settings.agent.ingest_timeout_s,
        )

    def owner_of(self, reading: GpuReading) -> Owner | None:
        job_id = reading.row.get("job_id")
        if not isinstance(job_id, str) or not job_id:
            return None
        namespace = reading.row.get("namespace")
        if reading.row.get("attribution") == "k8s" or (reading.row.get("pod") and namespace):
            team, user, project = self.labels
            return k8s_owner(
                job_id,
                namespace if isinstance(namespace, str) else None,
                reading.labels,
                team_labels=team,
                user_labels=user,
                project_labels=project,
            )
        if self.slurm_job_dir is not None:
            return read_job_record(self.slurm_job_dir, job_id)
        return None

    def observe(self, readings: Sequence[GpuReading]) -> None:
        """Queue the owners of jobs not reported yet (cheap: runs on the tick thread)."""
        new = False
        now = self._monotonic()
        with self._lock:
            for reading in readings:
                job_id = reading.row.get("job_id")
                if not isinstance(job_id, str) or job_id in self._known:
                    continue
                if job_id in self._pending or self._unowned.get(job_id, now) > now:
                    continue
                owner = self.owner_of(reading)
                if owner is not None and (owner.user or owner.team):
                    self._pending[job_id] = owner
                    self._unowned.pop(job_id, None)
                    new = True
                else:
                    if len(self._unowned) > _UNOWNED_LIMIT:
                        self._unowned.clear()
                    self._unowned[job_id] = now + UNOWNED_RETRY_S
        if new:
            self.wakeup.set()

    def flush(self) -> bool:
        """POST what is pending; True when the server accepted it (or nothing was pending)."""
        with self._lock:
            batch = list(self._pending.values())
        if not batch:
            return True
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        body = json.dumps([o.record() for o in batch]).encode()
        try:
            resp = self.transport.request(
                "POST", self.url, body=body, headers=headers, timeout_s=self.timeout_s
            )
        except SourceUnavailableError as exc:
            log.debug("owners not sent: %s", exc)
            return False
        if resp.status != 200:
            log.warning("ingest refused job owners (HTTP %s): %s", resp.status, resp.body[:300])
            if resp.status >= 500 or resp.status in (401, 403, 429):
                return False
        with self._lock:
            if len(self._known) > _MAX_KNOWN:
                self._known.clear()
            for owner in batch:
                self._pending.pop(owner.job_id, None)
                self._known.add(owner.job_id)
        return True

    def run(self, stop: threading.Event, retry_s: float = 5.0) -> None:
        """Worker thread: send when woken, retry every `retry_s` while something is pending."""
        while not stop.is_set():
            self.wakeup.wait(retry_s)
            self.wakeup.clear()
            self.flush()
        self.flush()
