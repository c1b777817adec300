"""On-demand profiling, server side: the request state machine between users, agents and analysis.

    created (API, dashboard)  pending
    an agent's poll matches   running    matched = [{host, pid, rank, state, trace_id, error}]
    every matched process     done       at least one trace stored (and analyzed, if a hook runs)
      has finished            failed     none did; `error` joins what went wrong per process
    nobody matched in time    failed     error says which agents polled and what they run
    no progress in time       expired

A matched process moves running -> analyzing (its trace is stored) -> done | failed. A request
without a rank may be joined by agents of other hosts while it is younger than the match timeout,
so a multi-node job is traced on every node. Uploaded traces go to the `on_trace_uploaded` hooks
(`notify`) on one worker thread, so an upload is answered before analysis runs; the hook calls
`finish` with the summary and the analysis document (stored once, read by the API and the
dashboard) or the error. With no hook, a stored trace is done, with no summary.
Every profile request, the dashboard's too, is created through `create` (the unknown-job check).
Timeouts are judged on every poll, every read and once a second on the worker thread.

All state changes happen under one lock in this process, in catalog transactions. Must never
parse a trace file or import the analyzers (the warehouse must not depend on them).
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

from sqlalchemy import Connection, Engine, select

from fleetscope.errors import CorruptTraceError, IngestError, NotFoundError
from warehouse.agent_registry import AgentRegistry, ReportedProcess, describe_agents
from warehouse.catalog import fleet
from warehouse.catalog.profiling import (
    ProfileRequest,
    Trace,
    create_profile_request,
    get_trace,
    profile_requests,
    record_trace,
    record_trace_analysis,
    update_profile_request,
)
from warehouse.trace_store import check_gzip_trace, store_trace, trace_id_for

if TYPE_CHECKING:
    from fleetscope.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_STEPS = 5  # the SDK's default too (collector.sdk.profiling): a few steady-state steps
FINISHED = frozenset({"done", "failed"})


@dataclass(frozen=True)
class ProfilingConfig:
    traces_dir: Path
    max_trace_bytes: int
    match_timeout_s: float
    run_timeout_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> ProfilingConfig:
        return cls(
            traces_dir=settings.path(settings.core.data_dir) / "traces",
            max_trace_bytes=settings.server.max_body_bytes,
            match_timeout_s=settings.server.profile_match_timeout_s,
            run_timeout_s=settings.server.profile_run_timeout_s,
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
    path: Path


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
    ) -> None:
        self.catalog = catalog
        self.config = config
        self.registry = registry if registry is not None else AgentRegistry(clock)
        self._notify = notify
        self._clock = clock
        self._lock = threading.RLock()
        self._queue: queue.Queue[TraceUpload | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="fleetscope-traces", daemon=True)
        self._thread.start()

    def stop(self) -> None:
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
            self._analyze(upload)

    def _analyze(self, upload: TraceUpload) -> None:
        try:
            handled = self._notify(upload) if self._notify is not None else False
        except Exception as exc:  # a hook's bug fails this trace, never the server
            log.exception("on_trace_uploaded hook failed for %s", upload.trace_id)
            self.finish(upload, error=f"trace analysis failed: {type(exc).__name__}: {exc}")
            return
        if not handled:
            self.finish(upload, summary=None)

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
            request = _get(conn, request_id)
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
        with self._lock:
            for result in results:
                self._fail_process(result.request_id, host, result.pid, result.error)
            self.sweep()
            now = self._now()
            join_after = now - timedelta(seconds=self.config.match_timeout_s)
            assignments = []
            with self.catalog.begin() as conn:
                for request in _open_requests(conn):
                    matched = list(request.matched or [])
                    if request.state == "running" and (
                        request.rank is not None
                        or request.created < join_after
                        or any(e["host"] == host for e in matched)
                    ):
                        continue
                    found = [
                        p
                        for p in processes
                        if p.job_id == request.job_id
                        and (request.rank is None or p.rank == request.rank)
                    ]
                    if not found:
                        continue
                    matched += [
                        {"host": host, "pid": p.pid, "rank": p.rank, "state": "running"}
                        for p in found
                    ]
                    update_profile_request(
                        conn,
                        request.id,
                        state="running",
                        matched=matched,
                        host=request.host or host,
                    )
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
        """Check and store one process's trace, record it, queue it for analysis."""
        with self._lock:
            with self.catalog.connect() as conn:
                request = _get(conn, request_id)
            entry = _entry(request, host, pid)
            if entry is None:
                raise IngestError(
                    f"profile request {request_id} did not match pid {pid} on {host}", status=409
                )
            if request.state != "running" or entry.get("state") != "running":
                raise IngestError(
                    f"profile request {request_id} is {request.state} (pid {pid} on {host}: "
                    f"{entry.get('state')}); no trace is expected",
                    status=409,
                )
            try:
                check_gzip_trace(body)
            except CorruptTraceError as exc:
                self._fail_process(
                    request_id, host, pid, f"the trace from {host} pid {pid} is corrupt: {exc}"
                )
                raise IngestError(f"corrupt trace: {exc}", status=400) from exc
            trace_id = trace_id_for(request_id, host, pid)
            path = store_trace(self.config.traces_dir, trace_id, body)
            rank = rank if rank is not None else entry.get("rank")
            with self.catalog.begin() as conn:
                record_trace(
                    conn, Trace(trace_id, request.job_id, host, rank, str(path), self._now(), None)
                )
                self._set_process(conn, request_id, host, pid, state="analyzing", trace_id=trace_id)
            upload = TraceUpload(trace_id, request_id, request.job_id, host, rank, pid, path)
        self._queue.put(upload)
        return upload

    def finish(
        self,
        upload: TraceUpload,
        *,
        summary: dict[str, Any] | None = None,
        analysis: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> None:
        """What an analysis hook calls: the trace's summary and analysis document, or why it could
        not be analyzed. Stored in the transaction that marks the process done."""
        with self._lock, self.catalog.begin() as conn:
            if summary is not None:
                record_trace(conn, replace(get_trace(conn, upload.trace_id), summary=summary))
            if analysis is not None:
                record_trace_analysis(conn, upload.trace_id, analysis)
            if error is None:
                self._set_process(conn, upload.request_id, upload.host, upload.pid, state="done")
            else:
                self._set_process(
                    conn, upload.request_id, upload.host, upload.pid, state="failed", error=error
                )

    # -- timeouts ------------------------------------------------------------------------------
    def sweep(self) -> None:
        """Fail requests nobody matched in time; expire running ones that stopped progressing."""
        now = self._now()
        match_before = now - timedelta(seconds=self.config.match_timeout_s)
        run_before = now - timedelta(seconds=self.config.run_timeout_s)
        with self._lock, self.catalog.begin() as conn:
            for request in _open_requests(conn):
                if request.state == "pending" and request.created < match_before:
                    update_profile_request(
                        conn, request.id, state="failed", error=self._no_match(request)
                    )
                elif request.state == "running" and request.updated < run_before:
                    matched = [
                        e
                        if e.get("state") in FINISHED
                        else {**e, "state": "failed", "error": "no trace arrived"}
                        for e in request.matched or []
                    ]
                    waiting = ", ".join(
                        f"{e['host']} pid {e['pid']}"
                        for e in request.matched or []
                        if e.get("state") not in FINISHED
                    )
                    update_profile_request(
                        conn,
                        request.id,
                        state="expired",
                        matched=matched,
                        error=f"no trace from {waiting} within {self.config.run_timeout_s:g} s "
                        "(server.profile_run_timeout_s): the process may have stopped stepping",
                    )

    def _no_match(self, request: ProfileRequest) -> str:
        what = f"job {request.job_id}" + (
            f" rank {request.rank}" if request.rank is not None else ""
        )
        since = request.created.timestamp() - self.config.match_timeout_s
        agents = self.registry.recent(since)
        if not agents:
            seen = "no agent polled meanwhile (is a fleetscope-agent with agent.profile_poll_s > 0 "
            seen += "shipping to this server?)"
        else:
            seen = "agents polling: " + describe_agents(agents)
        return (
            f"no processes matched {what} within {self.config.match_timeout_s:g} s "
            f"(server.profile_match_timeout_s); {seen}"
        )

    # -- per-process state ---------------------------------------------------------------------
    def _fail_process(self, request_id: int, host: str, pid: int, error: str) -> None:
        with self._lock, self.catalog.begin() as conn:
            self._set_process(conn, request_id, host, pid, state="failed", error=error)

    def _set_process(
        self, conn: Connection, request_id: int, host: str, pid: int, **changes: Any
    ) -> None:
        """Change one matched process's entry; settle the request once every process finished."""
        request = _get(conn, request_id)
        if request.state not in ("running",):
            return
        matched = [
            {**e, **changes} if (e["host"], e["pid"]) == (host, pid) else e
            for e in request.matched or []
        ]
        fields: dict[str, Any] = {"matched": matched}
        if changes.get("trace_id") and not request.trace_id:
            fields["trace_id"] = changes["trace_id"]
        if matched and all(e.get("state") in FINISHED for e in matched):
            errors = [
                f"{e['host']} pid {e['pid']}: {e['error']}" for e in matched if e.get("error")
            ]
            done = any(e.get("state") == "done" for e in matched)
            fields["state"] = "done" if done else "failed"
            fields["error"] = "; ".join(errors) or None
        update_profile_request(conn, request_id, **fields)


def _get(conn: Connection, request_id: int) -> ProfileRequest:
    row = (
        conn.execute(select(profile_requests).where(profile_requests.c.id == request_id))
        .mappings()
        .first()
    )
    if row is None:
        raise NotFoundError(f"no profile request {request_id}")
    return ProfileRequest(**row)


def _open_requests(conn: Connection) -> list[ProfileRequest]:
    query = (
        select(profile_requests)
        .where(profile_requests.c.state.in_(("pending", "running")))
        .order_by(profile_requests.c.id)
    )
    return [ProfileRequest(**row) for row in conn.execute(query).mappings()]


def _entry(request: ProfileRequest, host: str, pid: int) -> dict[str, Any] | None:
    for entry in request.matched or []:
        if (entry.get("host"), entry.get("pid")) == (host, pid):
            return dict(entry)
    return None
