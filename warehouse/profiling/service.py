"""On-demand profiling, server side: the request state machine between users, agents and analysis.

    created (API, dashboard)  pending
    an agent's poll matches   running    matched = [{host, pid, rank, state, trace_id, error}]
    every matched process     done       at least one trace stored (and analyzed, if a hook runs)
      has finished            failed     none did; `error` joins what went wrong per process
    nobody matched in time    failed     error says which agents polled and what they run
    no progress in time       expired    (a process whose trace is stored never expires)

A matched process moves running -> analyzing (its trace is stored) -> done | failed. A request
without a rank may be joined by agents of other hosts while it is younger than the match timeout,
so a multi-node job is traced on every node. Uploaded traces go to the `on_trace_uploaded` hooks
(`notify`) on one worker thread, so an upload is answered before analysis runs; the hook calls
`finish` with the summary and the analysis document (stored once, read by the API and the
dashboard) or the error. With no hook, a stored trace is done, with no summary. Every stored trace
is analysed once even if the server analysing it stops first: the server that stored it holds a
lease on its analysis, and another server (an embedded server at its next start) takes a lapsed
one over and analyses it through the same hooks (warehouse.profiling.analysis_leases).
Every profile request, the dashboard's too, is created through `create` (the unknown-job check).
Timeouts are judged on every poll, every read and once a second on the worker thread.

Every state change is a conditional update of the request's row in the catalog
(warehouse.profiling.transitions: the row locked, the expected state checked, then written), so
fleet gateways sharing one PostgreSQL catalog hand out and settle requests as one server would.
They also run under one lock in this process: on SQLite (the embedded catalog), where row locks
do not exist, that lock is what serialises them. Traces are stored through a TraceStorage
(warehouse.profiling.trace_backend: local disk embedded, the object store in fleet mode). Must never parse
a trace file or import the analyzers (the warehouse must not depend on them).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from fleetscope.errors import ConfigError, CorruptTraceError, IngestError, NotFoundError
from warehouse.catalog import fleet
from warehouse.catalog.profiling import (
    ProfileRequest,
    Trace,
    create_profile_request,
    get_trace,
    record_trace,
    record_trace_analysis,
    update_profile_request,
)
from warehouse.profiling import timeouts, transitions
from warehouse.profiling.agent_registry import AgentRegistry, ReportedProcess
from warehouse.profiling.analysis_leases import Adopted, AnalysisLeases, Held
from warehouse.profiling.trace_backend import LocalTraceStorage, TraceStorage
from warehouse.profiling.trace_files import check_gzip_trace, trace_id_for

if TYPE_CHECKING:
    from fleetscope.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_STEPS = 5  # the SDK's default too (collector.sdk.profiling): a few steady-state steps


@dataclass(frozen=True)
class ProfilingConfig:
    traces_dir: Path
    max_trace_bytes: int
    match_timeout_s: float
    run_timeout_s: float
    analysis_lease_s: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> ProfilingConfig:
        if settings.server.profile_analysis_lease_s <= 0:
            raise ConfigError(
                "server.profile_analysis_lease_s must be > 0 (seconds a claim on a trace's "
                f"analysis lasts), got {settings.server.profile_analysis_lease_s:g}"
            )
        return cls(
            traces_dir=settings.path(settings.core.data_dir) / "traces",
            max_trace_bytes=settings.server.max_body_bytes,
            match_timeout_s=settings.server.profile_match_timeout_s,
            run_timeout_s=settings.server.profile_run_timeout_s,
            analysis_lease_s=settings.server.profile_analysis_lease_s,
        )


@dataclass(frozen=True)
class TraceUpload:
    """A stored trace waiting for analysis: what an `on_trace_uploaded` hook receives."""

    trace_id: str
    request_id: int
    job_id: str
    host: str
    rank: int | None
    pid: int
    location: str  # where the storage put it: a path, or an s3:// URI in fleet mode


@dataclass(frozen=True)
class Assignment:
    """A request an agent must hand to some of its processes (the poll's answer)."""

    request_id: int
    job_id: str
    rank: int | None
    steps: int | None
    duration_s: float | None
    pids: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "job_id": self.job_id,
            "rank": self.rank,
            "steps": self.steps,
            "duration_s": self.duration_s,
            "pids": list(self.pids),
        }


@dataclass(frozen=True)
class AgentResult:
    """An agent's report that a matched process will deliver no trace, and why."""

    request_id: int
    pid: int
    error: str


Notify = Callable[[TraceUpload], bool]  # False: nobody analyzes traces on this server


class ProfilingService:
    def __init__(
        self,
        catalog: Engine,
        config: ProfilingConfig,
        *,
        notify: Notify | None = None,
        clock: Callable[[], float] = time.time,
        registry: AgentRegistry | None = None,
        storage: TraceStorage | None = None,
        sole_server: bool = False,
    ) -> None:
        """`sole_server`: no other server shares the catalog (the embedded server), so at start
        the analyses left unfinished were abandoned; otherwise (fleet gateways, and the safe
        default) a claim is taken over only once its lease lapsed."""
        self.catalog = catalog
        self.config = config
        self.storage = storage if storage is not None else LocalTraceStorage(config.traces_dir)
        self.registry = registry if registry is not None else AgentRegistry(clock)
        self._notify = notify
        self._clock = clock
        self._lock = threading.RLock()
        self._queue: queue.Queue[TraceUpload | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.leases = AnalysisLeases(
            catalog,
            self._lock,
            lease_s=config.analysis_lease_s,
            clock=clock,
            sole_server=sole_server,
            adopted=self._adopted,
        )

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fleetscope-traces", daemon=True)
        self._thread.start()
        self.leases.start()

    def stop(self) -> None:
        """Stop renewing leases, then let the queued traces' analyses run (up to 30 s): what is
        left goes to another server, or to this one's next start, once its lease lapses."""
        self.leases.stop()
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self) -> None:
        while True:
            try:
                upload = self._queue.get(timeout=1.0)
            except queue.Empty:
                self._safely(self.sweep)
                continue
            if upload is None:
                return
            try:
                self._analyze(upload)
            finally:
                self.leases.release(upload.trace_id)

    def _analyze(self, upload: TraceUpload) -> None:
        try:
            handled = self._notify(upload) if self._notify is not None else False
        except Exception as exc:  # a hook's bug fails this trace, never the server
            log.exception("on_trace_uploaded hook failed for %s", upload.trace_id)
            self.finish(upload, error=f"trace analysis failed: {type(exc).__name__}: {exc}")
            return
        if not handled:
            self.finish(upload, summary=None)

    def _adopted(self, taken: Adopted) -> None:
        """A stored trace whose analyser stopped: analysed here, as if it had been uploaded here."""
        t = taken
        upload = TraceUpload(t.trace_id, t.request_id, t.job_id, t.host, t.rank, t.pid, t.location)
        self._queue.put(upload)

    def holds(self, upload: TraceUpload) -> bool:
        """Whether this server still holds `upload`'s analysis (no other server took it over):
        the hooks run, and a finish counts, only while it does."""
        return self.leases.holds(upload.request_id, upload.host, upload.pid)

    def _safely(self, fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception:
            log.exception("profiling upkeep failed")

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), UTC)

    # -- requests ------------------------------------------------------------------------------
    def create(
        self,
        job_id: str,
        *,
        rank: int | None = None,
        steps: int | None = None,
        duration_s: float | None = None,
    ) -> int:
        """A pending request; NotFoundError for a job neither the catalog nor an agent knows."""
        with self.catalog.begin() as conn:
            known = fleet.get_job(conn, job_id) is not None or bool(
                fleet.allocations(conn, job_id=job_id)
            )
            since = self._clock() - self.config.match_timeout_s
            if not known and not self.registry.reports_job(job_id, since):
                raise NotFoundError(
                    f"unknown job {job_id!r}: the catalog never saw it and no polling agent "
                    "reports a process of it"
                )
            if steps is None and duration_s is None:
                steps = DEFAULT_STEPS
            return create_profile_request(
                conn, job_id, rank=rank, steps=steps, duration_s=duration_s
            )

    def describe(self, request_id: int) -> dict[str, Any]:
        """The request as `GET /v1/profile-requests/<id>` answers it."""
        self.sweep()
        with self.catalog.connect() as conn:
            request = transitions.get_request(conn, request_id)
            traces = []
            for entry in request.matched or []:
                if entry.get("trace_id"):
                    try:
                        trace = get_trace(conn, entry["trace_id"])
                    except NotFoundError:
                        continue
                    traces.append(
                        {
                            "trace_id": trace.trace_id,
                            "host": trace.host,
                            "rank": trace.rank,
                            "pid": entry.get("pid"),
                            "path": trace.path,
                            "state": entry.get("state"),
                            "summary": trace.summary,
                        }
                    )
        summaries = [t["summary"] for t in traces if t["summary"] is not None]
        return {
            "id": request.id,
            "job_id": request.job_id,
            "rank": request.rank,
            "steps": request.steps,
            "duration_s": request.duration_s,
            "state": request.state,
            "host": request.host,
            "matched": request.matched or [],
            "error": request.error,
            "trace_id": request.trace_id,
            "traces": traces,
            "summary": summaries or None,
            "created": request.created.isoformat(),
            "updated": request.updated.isoformat(),
        }

    # -- agents --------------------------------------------------------------------------------
    def poll(
        self,
        host: str,
        processes: Sequence[ReportedProcess],
        results: Sequence[AgentResult] = (),
    ) -> list[Assignment]:
        """Record what `host` runs, apply its reports, and hand it the requests it can serve."""
        self.registry.record(host, tuple(processes))
        for result in results:
            self._fail_process(result.request_id, host, result.pid, result.error)
        self.sweep()
        join_after = self._now() - timedelta(seconds=self.config.match_timeout_s)
        with self.catalog.connect() as conn:
            candidates = [
                r.id
                for r in transitions.open_requests(conn)
                if transitions.serves(r, host, processes, join_after)
            ]
        assignments = []
        for request_id in candidates:  # each re-checked on its locked row, in its own transaction
            with self._lock, self.catalog.begin() as conn:
                matched = transitions.match(conn, request_id, host, processes, join_after)
            if matched is not None:
                request, found = matched
                assignments.append(
                    Assignment(
                        request.id,
                        request.job_id,
                        request.rank,
                        request.steps,
                        request.duration_s,
                        tuple(p.pid for p in found),
                    )
                )
        return assignments

    # -- traces --------------------------------------------------------------------------------
    def reject_oversized(self, request_id: int, host: str, pid: int, size: int) -> None:
        self._fail_process(
            request_id,
            host,
            pid,
            f"the trace of {size} bytes from {host} pid {pid} is over the server's limit of "
            f"{self.config.max_trace_bytes} bytes (server.max_body_bytes); profile fewer steps",
        )

    def receive_trace(
        self, request_id: int, host: str, pid: int, rank: int | None, body: bytes
    ) -> TraceUpload:
        """Check, claim and store one process's trace, record it, queue it for analysis.

        The process's entry is claimed (running -> uploading) in the catalog before the body is
        stored, so of two copies of one upload arriving at two gateways one is stored and the
        other answered 409, as on one server."""
        with self.catalog.connect() as conn:
            request = transitions.get_request(conn, request_id)
        entry = transitions.entry(request, host, pid)
        if entry is None:
            raise IngestError(
                f"profile request {request_id} did not match pid {pid} on {host}", status=409
            )
        if request.state != "running" or entry.get("state") != "running":
            raise _unexpected(request, host, pid, entry)
        try:
            check_gzip_trace(body)
        except CorruptTraceError as exc:
            self._fail_process(
                request_id, host, pid, f"the trace from {host} pid {pid} is corrupt: {exc}"
            )
            raise IngestError(f"corrupt trace: {exc}", status=400) from exc
        if not self._change(request_id, host, pid, {"running"}, state="uploading"):
            raise self._unexpected_now(request_id, host, pid)
        trace_id = trace_id_for(request_id, host, pid)
        try:
            location = self.storage.store(trace_id, body)
        except BaseException:
            self._change(request_id, host, pid, {"uploading"}, state="running")  # agent may retry
            raise
        rank = rank if rank is not None else entry.get("rank")
        trace = Trace(trace_id, request.job_id, host, rank, location, self._now(), None)
        with self._lock, self.catalog.begin() as conn:
            stored = transitions.set_process(
                conn,
                request_id,
                host,
                pid,
                {"uploading"},
                state="analyzing",
                trace_id=trace_id,
                **self.leases.claim(),
            )
            if stored:
                record_trace(conn, trace)
        if not stored:  # the request expired meanwhile: refused as a late upload would be
            raise self._unexpected_now(request_id, host, pid)
        upload = TraceUpload(trace_id, request_id, request.job_id, host, rank, pid, location)
        self.leases.hold(Held(request_id, host, pid, trace_id))
        self._queue.put(upload)
        return upload

    def finish(
        self,
        upload: TraceUpload,
        *,
        summary: dict[str, Any] | None = None,
        analysis: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> bool:
        """What an analysis hook calls: the trace's summary and analysis document, or why it could
        not be analyzed. Stored in the transaction that marks the process done, only if this
        server still holds the trace's analysis; False when another server took it over (its
        outcome is the one kept)."""
        changes: dict[str, Any] = (
            {"state": "done"}
            if error is None
            else {
                "state": "failed",
                "error": error,
            }
        )
        with self._lock, self.catalog.begin() as conn:
            finished = transitions.set_process(
                conn,
                upload.request_id,
                upload.host,
                upload.pid,
                {"analyzing"},
                held_by=self.leases.analyser,
                **changes,
            )
            if not finished:
                log.warning(
                    "trace %s: analysed here, but no longer ours to finish", upload.trace_id
                )
                return False
            if summary is not None:
                record_trace(conn, replace(get_trace(conn, upload.trace_id), summary=summary))
            if analysis is not None:
                record_trace_analysis(conn, upload.trace_id, analysis)
        return True

    # -- timeouts ------------------------------------------------------------------------------
    def sweep(self) -> None:
        """Fail requests nobody matched in time; expire running ones that stopped progressing
        while a process still owed its trace (one whose trace is stored waits for its analysis)."""
        now = self._now()
        match_before = now - timedelta(seconds=self.config.match_timeout_s)
        run_before = now - timedelta(seconds=self.config.run_timeout_s)
        with self.catalog.connect() as conn:
            due = [
                r.id
                for r in transitions.open_requests(conn)
                if (r.state == "pending" and r.created < match_before)
                or (r.state == "running" and r.updated < run_before and timeouts.owes_trace(r))
            ]
        for request_id in due:  # each re-checked on its locked row, in its own transaction
            with self._lock, self.catalog.begin() as conn:
                request = transitions.settle_timeout(conn, request_id, match_before, run_before)
                if request is not None and (
                    request.state == "pending" or timeouts.owes_trace(request)
                ):
                    changes = timeouts.timed_out(
                        request,
                        self.config.match_timeout_s,
                        self.config.run_timeout_s,
                        self.registry,
                    )
                    update_profile_request(conn, request_id, **changes)

    # -- per-process state ---------------------------------------------------------------------
    def _fail_process(self, request_id: int, host: str, pid: int, error: str) -> None:
        self._change(request_id, host, pid, {"running"}, state="failed", error=error)

    def _change(
        self, request_id: int, host: str, pid: int, expect: set[str], **changes: Any
    ) -> bool:
        with self._lock, self.catalog.begin() as conn:
            return transitions.set_process(conn, request_id, host, pid, expect, **changes)

    def _unexpected_now(self, request_id: int, host: str, pid: int) -> IngestError:
        with self.catalog.connect() as conn:
            request = transitions.get_request(conn, request_id)
        return _unexpected(request, host, pid, transitions.entry(request, host, pid))


def _unexpected(
    request: ProfileRequest, host: str, pid: int, entry: dict[str, Any] | None
) -> IngestError:
    """409: a trace for a request or process that expects none (anymore)."""
    state = entry.get("state") if entry is not None else None
    return IngestError(
        f"profile request {request.id} is {request.state} (pid {pid} on {host}: {state}); "
        "no trace is expected",
        status=409,
    )
