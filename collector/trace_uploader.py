"""Uploads the traces training processes wrote on request: one POST per trace, retried with backoff.

    POST <ingest>/v1/traces?request_id=R&host=H&rank=K&pid=P   body: the .pt.trace.json.gz file

Outcomes: 2xx stored (the local file is deleted); 400, 404, 409, 413 the server refused this trace
for good and already knows why (the file is kept for a human, logged); 401, 403, 408, 429, 5xx or
no answer: retried with exponential backoff and full jitter, at most MAX_ATTEMPTS times, then the
failure is reported to the server through the next poll (`report`). A trace over the server's
limit is never sent: its size is reported instead.

Must never block the scrape loop (it runs on the profiling relay's thread) or send a file twice
after a 2xx.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from collector.backoff import Backoff
from collector.http import Transport
from collector.metrics import AgentMetrics
from fleetscope.errors import SourceUnavailableError

log = logging.getLogger(__name__)

# With the default backoff (0.5 s doubling, capped at agent.backoff_max_s = 60 s) eight attempts
# span a few minutes of ingest outage, long enough for a restart, short of the server's
# profile_run_timeout_s (15 min), after which nobody waits for the trace any more.
MAX_ATTEMPTS = 8
FINAL_4XX = frozenset({400, 404, 409, 413})

Report = Callable[[int, int, str], None]  # request_id, pid, error


@dataclass
class PendingUpload:
    request_id: int
    pid: int
    rank: int | None
    path: Path
    backoff: Backoff
    attempts: int = 0
    next_at: float = 0.0
    last_error: str = field(default="")


class TraceUploader:
    def __init__(
        self,
        *,
        ingest_url: str,
        token: str,
        transport: Transport,
        metrics: AgentMetrics,
        report: Report,
        timeout_s: float = 60.0,
        backoff_cap_s: float = 60.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ingest_url = ingest_url.rstrip("/")
        self.token = token
        self.transport = transport
        self.metrics = metrics
        self.report = report
        self.timeout_s = timeout_s
        self.backoff_cap_s = backoff_cap_s
        self.max_trace_bytes: int | None = None  # the server's limit, learnt from its polls
        self.pending: list[PendingUpload] = []
        self._monotonic = monotonic

    def add(self, request_id: int, pid: int, rank: int | None, path: Path) -> None:
        self.pending.append(
            PendingUpload(request_id, pid, rank, path, Backoff(cap_s=self.backoff_cap_s))
        )

    def next_due(self) -> float | None:
        return min((u.next_at for u in self.pending), default=None)

    def upload_due(self, host: str) -> None:
        now = self._monotonic()
        for upload in [u for u in self.pending if u.next_at <= now]:
            if self._attempt(upload, host):
                self.pending.remove(upload)

    def _attempt(self, upload: PendingUpload, host: str) -> bool:
        """One try; True when the upload is finished (stored, refused or given up)."""
        try:
            body = upload.path.read_bytes()
        except OSError as exc:
            self.report(upload.request_id, upload.pid, f"the trace file is unreadable: {exc}")
            return True
        limit = self.max_trace_bytes
        if limit is not None and len(body) > limit:
            self.report(
                upload.request_id,
                upload.pid,
                f"the trace of {len(body)} bytes is over the server's limit of {limit} bytes "
                f"(server.max_body_bytes); kept at {upload.path}",
            )
            return True
        query = {"request_id": upload.request_id, "host": host, "pid": upload.pid}
        if upload.rank is not None:
            query["rank"] = upload.rank
        headers = {"Content-Type": "application/gzip"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        url = f"{self.ingest_url}/v1/traces?{urllib.parse.urlencode(query)}"
        try:
            resp = self.transport.request(
                "POST", url, body=body, headers=headers, timeout_s=self.timeout_s
            )
        except SourceUnavailableError as exc:
            return self._retry(upload, str(exc))
        if 200 <= resp.status < 300:
            upload.path.unlink(missing_ok=True)
            log.info("trace of request %s (pid %s) uploaded", upload.request_id, upload.pid)
            return True
        message = resp.body[:500].decode("utf-8", "replace")
        if resp.status in FINAL_4XX:
            self.metrics.errors.labels("trace_refused").inc()
            log.error(
                "ingest refused the trace %s (HTTP %s): %s", upload.path, resp.status, message
            )
            return True
        return self._retry(upload, f"HTTP {resp.status}: {message}")

    def _retry(self, upload: PendingUpload, error: str) -> bool:
        self.metrics.errors.labels("trace_upload").inc()
        upload.attempts += 1
        upload.last_error = error
        if upload.attempts >= MAX_ATTEMPTS:
            self.report(
                upload.request_id,
                upload.pid,
                f"trace upload failed {upload.attempts} times, last: {error}; kept at "
                f"{upload.path}",
            )
            return True
        upload.next_at = self._monotonic() + upload.backoff.next_delay()
        log.warning("trace upload of request %s: %s; retrying", upload.request_id, error)
        return False
