"""Ships spooled batches to ingest, oldest first, exactly as fleetscope.contract's docstring says.

One POST per batch to `<ingest>/v1/batches/<table>` with the bearer token, the schema version, the
batch id chosen at sealing time and the agent's host name. Outcomes:

    202                         stored (or a duplicate): delete from the spool, count rows
    400, 409, 413, 415, 422     the batch itself is bad: move to dead-letter, log, go on
    401, 403, 404, 408, 429     the agent's token / URL / timing is wrong, not the batch: keep it,
                                back off, retry (dead-lettering would throw away good data because
                                of a config mistake)
    other 4xx                   dead-letter (the contract: "do not retry as is")
    5xx / no answer             keep it, back off with full jitter, retry the same batch

Order: a batch is only sent after every older one was acknowledged or dead-lettered, so ingest
sees batches in the order they were sealed.

Fail-over: `ingest_url` may be a comma-separated list of gateways (fleet mode) or one
load-balanced URL. A batch that gets no answer, or a 5xx, is retried on the next URL of the list
with the same batch id; the shared ledger answers a copy that already landed `duplicate: true`.

Must never: send a batch twice under different ids, or skip ahead of an unacknowledged batch.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable

from collector.backoff import Backoff
from collector.http import Transport
from collector.metrics import AgentMetrics
from collector.spool import Spool, SpooledBatch
from fleetscope.contract import (
    ARROW_STREAM_MEDIA_TYPE,
    HEADER_AGENT,
    HEADER_BATCH_ID,
    HEADER_SCHEMA_VERSION,
    SCHEMA_VERSION,
)
from fleetscope.errors import SourceUnavailableError

log = logging.getLogger(__name__)

RETRYABLE_4XX = frozenset({401, 403, 404, 408, 429})


class Shipper:
    def __init__(
        self,
        spool: Spool,
        *,
        ingest_url: str,
        token: str,
        agent_name: str,
        transport: Transport,
        metrics: AgentMetrics,
        timeout_s: float = 10.0,
        backoff: Backoff | None = None,
    ) -> None:
        self.spool = spool
        self.ingest_urls = split_urls(ingest_url)
        self._current = 0
        self.token = token
        self.agent_name = agent_name
        self.transport = transport
        self.metrics = metrics
        self.timeout_s = timeout_s
        self.backoff = backoff or Backoff()
        self.wakeup = threading.Event()
        self.rows_of: Callable[[bytes], int] = _rows_in_body

    def send(self, batch: SpooledBatch, body: bytes) -> str:
        """POST one batch; returns 'ok', 'dead' or 'retry'."""
        headers = {
            "Content-Type": ARROW_STREAM_MEDIA_TYPE,
            HEADER_SCHEMA_VERSION: str(SCHEMA_VERSION),
            HEADER_BATCH_ID: batch.batch_id,
            HEADER_AGENT: self.agent_name,
        }
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        url = f"{self.ingest_url}/v1/batches/{batch.table}"
        try:
            resp = self.transport.request(
                "POST", url, body=body, headers=headers, timeout_s=self.timeout_s
            )
        except SourceUnavailableError as exc:
            self.metrics.errors.labels("ingest_unreachable").inc()
            log.debug("ingest %s unreachable: %s", self.ingest_url, exc)
            self.fail_over()
            return "retry"
        if resp.status == 202:
            try:
                rows = int(json.loads(resp.body).get("rows", 0))
            except (ValueError, AttributeError):
                rows = self.rows_of(body)
            self.metrics.samples_shipped.labels(batch.table).inc(rows)
            self.metrics.batches_shipped.inc()
            return "ok"
        message = resp.body[:500].decode("utf-8", "replace")
        if resp.status >= 500 or resp.status in RETRYABLE_4XX:
            kind = "ingest_auth" if resp.status in (401, 403) else f"ingest_{resp.status // 100}xx"
            self.metrics.errors.labels(kind).inc()
            if resp.status in (401, 403):
                log.error("ingest refused our token (HTTP %s): %s", resp.status, message)
            if resp.status >= 500:
                self.fail_over()
            return "retry"
        log.error(
            "ingest refused batch %s (HTTP %s): %s; moved to %s",
            batch.batch_id,
            resp.status,
            message,
            self.spool.dead_dir,
        )
        self.metrics.errors.labels("batch_refused").inc()
        self.metrics.batches_dead.inc()
        self.spool.dead_letter(batch, f"HTTP {resp.status}: {message}")
        return "dead"

    @property
    def ingest_url(self) -> str:
        """The gateway batches go to now."""
        return self.ingest_urls[self._current]

    def fail_over(self) -> None:
        """Move to the next gateway of the list (no-op with one URL)."""
        self._current = (self._current + 1) % len(self.ingest_urls)

    def drain(self) -> bool:
        """Send pending batches in order until the spool is empty (True) or a retry is due."""
        while True:
            batch = self.spool.oldest()
            if batch is None:
                self._update_gauges()
                return True
            body = self.spool.read(batch)
            if body is None:  # dropped by the size cap meanwhile
                self.spool.ack(batch)
                continue
            outcome = self.send(batch, body)
            if outcome == "retry":
                self._update_gauges()
                return False
            if outcome == "ok":
                self.spool.ack(batch)
            self.backoff.reset()

    def _update_gauges(self) -> None:
        self.metrics.spool_depth.set(self.spool.depth)
        self.metrics.spool_bytes.set(self.spool.bytes)
        self.metrics.record_dropped(self.spool.dropped)

    def run(self, stop: threading.Event, idle_wait_s: float = 30.0) -> None:
        """The sender thread: drain, then wait for new batches or the backoff delay.

        Whoever seals a batch sets `wakeup` (the agent's tick, and its shutdown), so the idle
        wait is only a safety net; waking every second cost the agent measurable CPU.
        """
        while not stop.is_set():
            if self.drain():
                self.wakeup.wait(idle_wait_s)
                self.wakeup.clear()
            else:
                stop.wait(self.backoff.next_delay())
        self._update_gauges()


def split_urls(ingest_url: str) -> list[str]:
    """`agent.ingest_url` as a list: one URL, or several separated by commas."""
    urls = [u.strip().rstrip("/") for u in ingest_url.split(",") if u.strip()]
    return urls or [ingest_url.rstrip("/")]


def _rows_in_body(body: bytes) -> int:
    from fleetscope.contract import from_ipc

    return int(from_ipc(body).num_rows)
