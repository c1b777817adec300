"""Prometheus remote_write receiver: samples of dcgm-exporter series -> whole gpu_samples rows.

What it is for: `POST /api/v1/write` (server.py) hands the body here; teams that already run
Prometheus with dcgm-exporter forward to fleetscope without agents.

Why rows are *assembled* across requests: Prometheus does not send a scrape in one request. Its
queue manager spreads series over shards (`ref % shards`) and cuts a shard's batch at
`max_samples_per_send` samples or every `batch_send_deadline` (prometheus storage/remote/
queue_manager.go, `runShard`), so the ~30 fields of one GPU at one scrape often arrive in two or
more requests. Grouping per request would store partial rows with duplicate keys. Instead the
`Assembler` keeps, per target (cluster, host), the scrapes not yet complete and the newest
timestamp of every live series. Each series reaches a shard in timestamp order, so a scrape at T
is complete once every live series of its target has a sample newer than T; a series that ends
gets a staleness marker (a failed scrape marks them all), which removes it from the live set. A
scrape still waiting after `server.remote_write_hold_s` (the target stopped, Prometheus stopped)
is stored as it is. Samples for a scrape already taken (a late shard, a retried request) are
dropped and counted: each scrape is stored at most once.

Idempotency: every scrape taken is one ledger batch whose id is the hash of its (cluster, host,
timestamp) key, whichever receiver assembled it and whatever else was taken with it, so the
ledger stores a scrape at most once across every receiver sharing it (the fleet's gateways). The
scrapes one request (or flush) takes are submitted as ONE writer ticket with one part per scrape
(warehouse.prometheus.remote_write_units: one ticket per scrape made a 1,000-scrape catch-up request take
seconds). A ticket with a part that fails to commit is kept whole and retried (by the next
request or the flush thread) until it commits; its parts keep their ids, so the ledger
deduplicates them exactly; the request that took it is answered 503, and Prometheus re-sends the same body,
whose samples are then late and dropped. After a restart the taken-watermark per target is read
back from the last 3 hours of gpu_samples (Prometheus cannot re-send anything older than its WAL,
which keeps about 2 hours), so a request Prometheus re-sends across a restart is not stored twice.
The receiver is given that read as a function (`watermarks`): the embedded server reads its
DuckDB file (`recent_scrapes`), a fleet gateway a projected Iceberg scan
(warehouse.fleet.reader.newest_per_target); a failed read answers 503 and is tried again on the
next request, never skipped (without it a re-sent scrape could be stored twice).

One receiver per Prometheus: the assembly is in this process's memory, so every shard of one
Prometheus must reach the same receiver (a fleet gateway: see warehouse.fleet.gateway). A batch
the ledger already holds when first submitted is counted (`already_stored`): another receiver
stored the same scrape (a failover re-send, or a Prometheus whose shards are split; a collision
with a commit still under way is answered 503 instead, and its retry is not counted).

Answers: 204 after the complete scrapes are committed; 400 (Prometheus drops the batch, no retry)
for a body that is not a snappy WriteRequest; 503 when the writer queue is full or the commit
failed (Prometheus retries with backoff). Durability limit: samples of scrapes still waiting for
their other series are in memory only; a crash loses (or stores partly) at most those, about one
scrape interval per target. A clean stop stores them.

Must never: block a request on another request's commit while holding the lock, or store a
scrape twice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Final

from fleetscope.errors import ContractError, DecodeBudgetError, IngestError, PayloadTooLargeError
from fleetscope.exposition import Sample
from warehouse.ingest.batch_queue import Ticket
from warehouse.ingest.sink import BatchSink
from warehouse.prometheus.prompb import DecodeLimits, Series, decode_write_request, is_stale_marker
from warehouse.prometheus.remote_write_request import decode_limits
from warehouse.prometheus.remote_write_units import Unit, unit_of
from warehouse.prometheus.rows import DCGM_PREFIX, ScrapeKey, exporter_labels, scrape_of
from warehouse.storage.writer import Writer

if TYPE_CHECKING:
    from fleetscope.settings import Settings

__all__ = ["Assembler", "RemoteWrite", "Scrape", "unit_of"]

log = logging.getLogger(__name__)

AGENT: Final = "prometheus-remote-write"  # the ledger's `agent` for these batches
# Prometheus keeps at least 2 h of WAL (its head block); nothing older can be re-sent.
REPLAY_WINDOW_S: Final = 3 * 3600

SeriesId = tuple[tuple[str, str], ...]
_ROUTE_CACHE_MAX: Final = 1_000_000  # series; about 10,000 hosts x 8 GPUs x 12 fields


@dataclass
class Scrape:
    """One target's samples at one timestamp, as far as they have arrived."""

    key: ScrapeKey
    ts_ms: int
    born_s: float
    samples: dict[SeriesId, Sample] = field(default_factory=dict)
    complete: bool = False


@dataclass
class AssemblerStats:
    series_ignored: int = 0  # not a per-GPU DCGM series (up, node_exporter, DCGM_FI_DEV_COUNT...)
    samples: int = 0  # per-GPU DCGM samples kept
    stale_markers: int = 0
    late_samples: int = 0  # for a scrape already taken: a late shard or a re-sent request
    scrapes_complete: int = 0
    scrapes_incomplete: int = 0  # taken at the hold timeout or at shutdown


class Assembler:
    """The state machine of the module docstring: no I/O, no locking, the clock injected."""

    def __init__(
        self,
        *,
        default_cluster: str,
        hold_s: float,
        clock: Callable[[], float] = time.monotonic,
        watermarks: Mapping[ScrapeKey, int] | None = None,
        known_cluster: Callable[[str], str | None] | None = None,
    ) -> None:
        self.default_cluster = default_cluster
        self.known_cluster = known_cluster
        self.hold_s = hold_s
        self.clock = clock
        self.stats = AssemblerStats()
        self._pending: dict[ScrapeKey, dict[int, Scrape]] = {}
        self._live: dict[ScrapeKey, dict[SeriesId, int]] = {}
        self._taken: dict[ScrapeKey, int] = dict(watermarks or {})
        self._newest: dict[ScrapeKey, int] = {}
        self._touched: set[ScrapeKey] = set()
        # Series repeat every scrape: their routing is computed once (bounded, then restarted).
        self._routes: dict[SeriesId, tuple[str, dict[str, str], ScrapeKey | None]] = {}

    def _route(self, raw: dict[str, str]) -> tuple[str, dict[str, str], ScrapeKey | None]:
        """A series' name, exporter labels and target; the target is None to ignore it."""
        name = raw.get("__name__", "")
        labels = exporter_labels(raw) if name.startswith(DCGM_PREFIX) else {}
        target = scrape_of(labels, self.default_cluster, self.known_cluster) if labels else None
        return name, labels, target

    @property
    def waiting(self) -> int:
        return sum(len(scrapes) for scrapes in self._pending.values())

    def add(self, series: list[Series]) -> None:
        now = self.clock()
        stats = self.stats
        routes = self._routes
        for one in series:
            sid: SeriesId = tuple(one.labels.items())
            route = routes.get(sid)
            if route is None:
                if len(routes) >= _ROUTE_CACHE_MAX:
                    routes.clear()
                route = routes[sid] = self._route(one.labels)
            name, labels, key = route
            if key is None:
                stats.series_ignored += 1
                continue
            live = self._live.setdefault(key, {})
            taken = self._taken.get(key, -1)
            for ts_ms, value in one.samples:
                if is_stale_marker(value):
                    stats.stale_markers += 1
                    if live.get(sid, ts_ms) <= ts_ms:
                        live.pop(sid, None)
                        self._touched.add(key)
                    continue
                if ts_ms <= taken:
                    stats.late_samples += 1
                    continue
                if live.get(sid, ts_ms) <= ts_ms:
                    live[sid] = ts_ms
                if self._newest.get(key, -1) < ts_ms:
                    self._newest[key] = ts_ms
                self._touched.add(key)
                pending = self._pending.get(key)
                if pending is None:
                    pending = self._pending[key] = {}
                scrape = pending.get(ts_ms)
                if scrape is None:
                    scrape = pending[ts_ms] = Scrape(key, ts_ms, now)
                scrape.samples[sid] = Sample(name, labels, value, None)
                stats.samples += 1

    def take(self, *, everything: bool = False, all_targets: bool = False) -> list[Scrape]:
        """Remove and return the scrapes that are complete, waited `hold_s`, or (`everything`) all.

        Per target, in timestamp order, stopping at the first one that must still wait: a scrape
        is complete when it is older than the oldest newest-sample of the live series. Only the
        targets that got samples since the last call are looked at, unless `all_targets` (the
        flush thread's periodic pass, which finds scrapes that waited `hold_s`).
        """
        now = self.clock()
        hold_ms = self.hold_s * 1000.0
        touched, self._touched = self._touched, set()
        keys = list(self._pending) if all_targets or everything else list(touched)
        out: list[Scrape] = []
        for key in keys:
            scrapes = self._pending.get(key)
            if scrapes is None:
                if not self._live.get(key):  # only staleness markers: the target went away
                    self._live.pop(key, None)
                    self._newest.pop(key, None)
                continue
            # Untouched since its last look: only the hold timeout can make it due, and checking
            # the oldest scrape's age keeps the periodic pass O(targets).
            if (
                all_targets
                and not everything
                and key not in touched
                and now - scrapes[min(scrapes)].born_s < self.hold_s
            ):
                continue
            live = self._live.get(key, {})
            # A series that stopped without a staleness marker (Prometheus restarted meanwhile)
            # must not hold its target's scrapes forever: forget it after hold_s of silence.
            newest = self._newest.get(key, -1)
            for sid in [sid for sid, ts in live.items() if ts < newest - hold_ms]:
                del live[sid]
            horizon = min(live.values(), default=None)
            for ts_ms in sorted(scrapes):
                scrape = scrapes[ts_ms]
                scrape.complete = horizon is None or ts_ms < horizon
                if not (scrape.complete or everything or now - scrape.born_s >= self.hold_s):
                    break
                out.append(scrapes.pop(ts_ms))
                self._taken[key] = max(self._taken.get(key, -1), ts_ms)
                if scrape.complete:
                    self.stats.scrapes_complete += 1
                else:
                    self.stats.scrapes_incomplete += 1
            if not scrapes:
                del self._pending[key]
                if not live:
                    self._live.pop(key, None)
                    self._newest.pop(key, None)
        return out


class RemoteWrite:
    """Decodes requests, assembles scrapes, commits them through the writer; see the docstring.

    `watermarks` reads the newest stored timestamp per target over the replay window; it is
    called once, on the first request (the writer's store is open by then)."""

    def __init__(
        self,
        writer: BatchSink,
        *,
        watermarks: Callable[[], Mapping[ScrapeKey, int]],
        default_cluster: str,
        hold_s: float,
        commit_timeout_s: float,
        limits: DecodeLimits,
        clock: Callable[[], float] = time.monotonic,
        known_cluster: Callable[[str], str | None] | None = None,
    ) -> None:
        self._writer = writer
        self._watermarks = watermarks
        self.known_cluster = known_cluster
        self._commit_timeout_s = commit_timeout_s
        self._limits = limits
        self._lock = threading.Lock()
        self._assembler: Assembler | None = None
        self._assembler_args = (default_cluster, hold_s, clock)
        self._retry: list[Unit] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.requests = 0
        self.rows_stored = 0
        self.already_stored = 0  # batches the ledger held on their first submission

    @classmethod
    def from_settings(
        cls,
        writer: BatchSink,
        settings: Settings,
        *,
        watermarks: Callable[[], Mapping[ScrapeKey, int]],
        known_cluster: Callable[[str], str | None],
    ) -> RemoteWrite:
        """The receiver as either server runs it (the embedded one and a fleet gateway differ
        only in their writer, where the watermarks come from and how a host's cluster is known)."""
        return cls(
            writer,
            watermarks=watermarks,
            default_cluster=settings.server.prometheus_cluster,
            hold_s=settings.server.remote_write_hold_s,
            commit_timeout_s=settings.warehouse.commit_timeout_s,
            limits=decode_limits(settings),
            known_cluster=known_cluster,
        )

    @property
    def assembler(self) -> Assembler:
        """Created on first use: reading the watermarks needs the writer's store open. A read
        that fails is IngestError 503 and leaves no assembler, so the next request reads again."""
        if self._assembler is None:
            cluster, hold_s, clock = self._assembler_args
            try:
                watermarks = self._watermarks()
            except Exception as exc:
                log.exception("remote_write: reading the restart watermarks failed")
                raise IngestError(
                    f"remote_write cannot read back what it stored before: {exc}; retry later",
                    status=503,
                ) from exc
            self._assembler = Assembler(
                default_cluster=cluster,
                hold_s=hold_s,
                clock=clock,
                watermarks=watermarks,
                known_cluster=self.known_cluster,
            )
        return self._assembler

    def snapshot(self) -> tuple[AssemblerStats, int]:
        """The assembler's counters and its waiting scrapes, consistent (for /metrics)."""
        with self._lock:
            assembler = self._assembler
            if assembler is None:
                return AssemblerStats(), 0
            return replace(assembler.stats), assembler.waiting

    def receive(self, body: bytes) -> None:
        """Take one request body; returns once its complete scrapes are committed.

        IngestError 400 for a body that is not a WriteRequest or holds a sample that can never
        be stored, 413 naming the limit a request breaks, 503 when a commit failed. Every 4xx is
        decided before any of the request's samples is taken: Prometheus drops a batch it got a
        4xx for and never re-sends it, so a refusal after a 2xx would be a silent loss.
        """
        try:
            series = decode_write_request(body, limits=self._limits)
        except DecodeBudgetError as exc:
            raise PayloadTooLargeError(str(exc)) from exc
        except ContractError as exc:
            raise IngestError(str(exc)) from exc
        with self._lock:
            self.requests += 1
            self.assembler.add(series)
            retries, scrapes = self._take_locked(everything=False, all_targets=False)
        self._commit(retries, [unit_of(scrapes)] if scrapes else [])

    def flush(self, *, everything: bool = False) -> None:
        """Store what is due (or everything); the flush thread and `stop` call this."""
        with self._lock:
            retries, scrapes = self._take_locked(everything=everything, all_targets=True)
        self._commit(retries, [unit_of(scrapes)] if scrapes else [])

    def start(self) -> None:
        hold_s = self._assembler_args[1]
        period_s = min(1.0, max(hold_s / 4, 0.05))
        self._thread = threading.Thread(
            target=self._run, args=(period_s,), name="fleetscope-remote-write", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        """Store every waiting scrape (incomplete ones as they are); call before the writer stops."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            self.flush(everything=True)
        except IngestError as exc:
            log.error("remote_write: %d batches not stored at shutdown: %s", len(self._retry), exc)

    def _run(self, period_s: float) -> None:
        while not self._stop.wait(period_s):
            try:
                self.flush()
            except IngestError as exc:
                log.warning("remote_write: %s", exc)
            except Exception:  # the thread must outlive a bug in one flush
                log.exception("remote_write flush failed")

    def _take_locked(
        self, *, everything: bool, all_targets: bool
    ) -> tuple[list[Unit], list[Scrape]]:
        """Batches to retry, and the scrapes due now (turned into rows outside the lock)."""
        units, self._retry = self._retry, []
        if self._assembler is None:
            return units, []
        return units, self._assembler.take(everything=everything, all_targets=all_targets)

    def _commit(self, retries: list[Unit], fresh: list[Unit]) -> None:
        """Submit and wait, one ticket per unit; `fresh` units were never submitted by this
        receiver, so a duplicate part in one means another receiver stored that scrape."""
        failed: list[Unit] = []
        waiting = []
        for unit in retries + fresh:
            try:
                ticket, _ = self._writer.submit_parts("gpu_samples", unit.table, unit.parts, AGENT)
            except IngestError:
                failed.append(unit)
            else:
                waiting.append((unit, ticket))
        for unit, ticket in waiting:
            if not ticket.wait(self._commit_timeout_s):
                failed.append(unit)
                continue
            self._account(ticket, first_try=any(unit is one for one in fresh))
            if ticket.error is not None and ticket.status >= 500:
                failed.append(unit)  # retried whole: its stored parts come back duplicates
        if failed:
            with self._lock:
                self._retry = failed + self._retry
            raise IngestError(
                f"{len(failed)} batch(es) of assembled scrapes are not committed yet; "
                "they are kept and retried",
                status=503,
            )

    def _account(self, ticket: Ticket, *, first_try: bool) -> None:
        """Count the answer of each part (one scrape) of a done ticket."""
        elsewhere = conflicted = 0
        for part in ticket.children:
            if part.conflicted:
                # another receiver stored other parts of this scrape under the same id first
                # (split shards): the ledger keeps the first part, as for a duplicate
                conflicted += 1
            elif part.error is not None and part.status < 500:
                # the writer can never store it (poison isolation): retrying would block the rest
                log.error("remote_write: batch %s refused for good: %s", part.batch_id, part.error)
            elif part.error is not None:
                continue
            elif not part.duplicate:
                self.rows_stored += part.rows
            elif first_try:
                elsewhere += 1
        self.already_stored += elsewhere + conflicted
        if conflicted:
            log.warning(
                "remote_write: %d scrape(s) were stored first with other content by another "
                "receiver (one Prometheus's shards split over several gateways)",
                conflicted,
            )
        if elsewhere:
            log.warning(
                "remote_write: %d scrape(s) were already stored by another receiver (a re-send "
                "after a failover, or one Prometheus's shards reaching several gateways)",
                elsewhere,
            )


def recent_scrapes(writer: Writer) -> dict[ScrapeKey, int]:
    """Newest stored timestamp per (cluster, host) over the replay window (see the docstring)."""
    rows = (
        writer.cursor()
        .execute(
            "SELECT coalesce(cluster, ''), host, epoch_ms(max(ts)) FROM gpu_samples "
            f"WHERE ts >= now() - INTERVAL {REPLAY_WINDOW_S} SECOND GROUP BY ALL"
        )
        .fetchall()
    )
    return {(str(cluster), str(host)): int(ts) for cluster, host, ts in rows}
