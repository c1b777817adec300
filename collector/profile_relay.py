"""The agent's half of on-demand profiling: poll ingest, hand requests to processes, ship traces.

Every agent.profile_poll_s the relay POSTs `<ingest>/v1/agent/poll`

    {"host": H, "processes": [{"pid", "job_id", "rank"}], "results": [{"request_id", "pid", "error"}]}

listing the live instrumented training processes (collector.sdk.receiver) and the processes that
will deliver no trace, with why (unreachable control socket, the profiler's own error, an upload
given up). The answer names the requests to run and the pids the server matched; the relay sends
each pid's SDK a `profile` datagram (collector/sdk/messages.py) with the trace folder. When the
SDK reports the written trace, the TraceUploader ships it.

Runs on its own thread (an Agent worker), so a slow or dead ingest never delays a scrape; a failed
poll keeps its results for the next one. Must never raise out of `run` on a network or protocol
fault, or send a profile request to a pid the server did not name.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from collector.http import Transport
from collector.metrics import AgentMetrics
from collector.sdk.receiver import TraceNotice, TrainingProcess
from collector.trace_uploader import TraceUploader
from fleetscope.errors import SourceUnavailableError

log = logging.getLogger(__name__)

STOP_CHECK_S = 1.0  # longest block on the trace queue: how soon the thread notices a stop


class Processes(Protocol):
    """What the relay needs of collector.sdk.receiver.StepReceiver."""

    traces: queue.Queue[TraceNotice]

    def processes(self) -> list[TrainingProcess]: ...

    def request_profile(self, process: TrainingProcess, request: dict[str, Any]) -> bool: ...


class ProfileRelay:
    def __init__(
        self,
        receiver: Processes,
        *,
        ingest_url: str,
        token: str,
        host: Callable[[], str],
        transport: Transport,
        trace_dir: Path,
        poll_interval_s: float,
        uploader: TraceUploader,
        metrics: AgentMetrics,
        timeout_s: float = 10.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.receiver = receiver
        self.ingest_url = ingest_url.rstrip("/")
        self.token = token
        self.host = host
        self.transport = transport
        self.trace_dir = trace_dir
        self.poll_interval_s = poll_interval_s
        self.uploader = uploader
        self.metrics = metrics
        self.timeout_s = timeout_s
        self.results: list[dict[str, Any]] = []
        self.dispatched: dict[tuple[int, int], int | None] = {}  # (request, pid) -> rank
        self._monotonic = monotonic
        self._refused_with: int | None = None

    def report(self, request_id: int, pid: int, error: str) -> None:
        """Tell the server, on the next poll, that this process will deliver no trace."""
        log.warning("profile request %s, pid %s: %s", request_id, pid, error)
        self.dispatched.pop((request_id, pid), None)
        self.results.append({"request_id": request_id, "pid": pid, "error": error})

    # -- polling -------------------------------------------------------------------------------
    def poll(self) -> bool:
        """One poll; True when the server answered it."""
        processes = self.receiver.processes()
        sent_results = list(self.results)
        body = {
            "host": self.host(),
            "processes": [
                {
                    "pid": p.pid,
                    "job_id": p.job_id if isinstance(p.job_id, str) else None,
                    "rank": p.rank if isinstance(p.rank, int) and p.rank >= 0 else None,
                }
                for p in processes
            ],
            "results": sent_results,
        }
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            resp = self.transport.request(
                "POST",
                f"{self.ingest_url}/v1/agent/poll",
                body=json.dumps(body).encode(),
                headers=headers,
                timeout_s=self.timeout_s,
            )
        except SourceUnavailableError as exc:
            self.metrics.errors.labels("profile_poll").inc()
            log.debug("profile poll: %s", exc)
            return False
        if resp.status != 200:
            self.metrics.errors.labels("profile_poll").inc()
            # Said once per change (a server without profiling answers 404 at every poll).
            level = logging.DEBUG if resp.status == self._refused_with else logging.WARNING
            self._refused_with = resp.status
            log.log(
                level,
                "profile poll refused (HTTP %s): %s",
                resp.status,
                resp.body[:300].decode("utf-8", "replace"),
            )
            return False
        self._refused_with = None
        del self.results[: len(sent_results)]
        try:
            answer = json.loads(resp.body)
            requests = answer["requests"]
            self.uploader.max_trace_bytes = int(answer["max_trace_bytes"])
        except (ValueError, KeyError, TypeError) as exc:
            self.metrics.errors.labels("profile_poll").inc()
            log.error("profile poll: unreadable answer: %s", exc)
            return True
        by_pid = {p.pid: p for p in processes}
        for request in requests:
            self.dispatch(request, by_pid)
        return True

    def dispatch(self, request: dict[str, Any], by_pid: dict[int, TrainingProcess]) -> None:
        """Send one request to each pid the server matched; report those that cannot take it."""
        request_id = int(request["request_id"])
        message = {
            "request_id": str(request_id),
            "steps": request.get("steps"),
            "duration_s": request.get("duration_s"),
            "out_dir": str(self.trace_dir),
        }
        for pid in request.get("pids", []):
            process = by_pid.get(pid)
            if process is None:
                self.report(request_id, pid, "the process is no longer known to the agent")
            elif not process.control:
                self.report(
                    request_id,
                    pid,
                    "the process has no SDK control socket to take profile requests (its SDK "
                    "could not bind one next to the agent's socket, or it is a simulated process)",
                )
            elif not self.receiver.request_profile(process, message):
                self.report(
                    request_id,
                    pid,
                    f"cannot reach the process's SDK control socket {process.control} "
                    "(the process exited?)",
                )
            else:
                self.dispatched[(request_id, pid)] = process.rank
                log.info("profile request %s sent to pid %s (job %s)", request_id, pid,
                         process.job_id)  # fmt: skip

    # -- traces --------------------------------------------------------------------------------
    def collect_traces(self) -> None:
        """Turn the SDKs' trace notices into uploads (or reports of their errors)."""
        while True:
            try:
                self.take(self.receiver.traces.get_nowait())
            except queue.Empty:
                return

    def take(self, notice: TraceNotice) -> None:
        try:
            request_id = int(notice.request_id)
        except ValueError:
            log.warning("trace notice for unknown request %r ignored", notice.request_id)
            return
        if (request_id, notice.pid) not in self.dispatched:
            log.warning("trace notice for request %s pid %s that this agent did not send",
                        request_id, notice.pid)  # fmt: skip
            return
        rank = self.dispatched.pop((request_id, notice.pid))
        if notice.error or not notice.path:
            self.report(
                request_id, notice.pid, f"the profiler in the process failed: {notice.error}"
            )
        else:
            self.uploader.add(request_id, notice.pid, rank, Path(notice.path))

    def run(self, stop: threading.Event) -> None:
        """The relay thread: poll on its interval, upload what is due, and otherwise sleep on the
        trace queue, so a written trace is picked up at once and an idle relay costs nothing."""
        next_poll = self._monotonic()
        while not stop.is_set():
            try:
                now = self._monotonic()
                if now >= next_poll:
                    self.poll()
                    next_poll = now + self.poll_interval_s
                self.collect_traces()
                self.uploader.upload_due(self.host())
                due = min(next_poll, self.uploader.next_due() or next_poll)
                wait_s = min(STOP_CHECK_S, max(0.0, due - self._monotonic()))
                self.take(self.receiver.traces.get(timeout=wait_s))
            except queue.Empty:
                continue
            except Exception:  # a bug here must not take the agent down with it
                log.exception("profiling relay")
                stop.wait(STOP_CHECK_S)
