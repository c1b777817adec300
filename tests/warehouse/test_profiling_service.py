"""The profiling state machine on a real catalog (SQLite in tmp_path) with an injected clock:
matching, the no-match message, multi-host joins, per-process failures, traces and timeouts."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetscope.errors import IngestError, NotFoundError
from warehouse import catalog
from warehouse.catalog.fleet import Job, upsert_jobs
from warehouse.catalog.profiling import get_trace, get_trace_analysis, list_profile_requests
from warehouse.profiling.agent_registry import ReportedProcess
from warehouse.profiling.service import (
    AgentResult,
    ProfilingConfig,
    ProfilingService,
    TraceUpload,
)

TRACE = gzip.compress(b'{"traceEvents": [], "schemaVersion": 1}')


class Clock:
    """Real time plus an offset the test advances (the catalog stamps rows with real time)."""

    def __init__(self) -> None:
        import time

        self._time = time.time
        self.offset = 0.0

    def __call__(self) -> float:
        return self._time() + self.offset


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_service(tmp_path: Path, clock: Clock) -> Callable[..., ProfilingService]:
    engine = catalog.connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    with engine.begin() as conn:
        upsert_jobs(conn, [Job("train-7"), Job("idle-job")])

    def make(notify: Callable[[TraceUpload], bool] | None = None) -> ProfilingService:
        config = ProfilingConfig(
            traces_dir=tmp_path / "traces",
            max_trace_bytes=1 << 20,
            match_timeout_s=15.0,
            run_timeout_s=900.0,
        )
        return ProfilingService(engine, config, notify=notify, clock=clock)

    return make


def procs(*items: tuple[int, str | None, int | None]) -> list[ReportedProcess]:
    return [ReportedProcess(pid, job, rank) for pid, job, rank in items]


def test_a_job_nobody_knows_is_refused_and_one_an_agent_reports_is_accepted(
    make_service: Callable[..., ProfilingService],
) -> None:
    service = make_service()
    with pytest.raises(NotFoundError, match="unknown job 'fresh-job': the catalog never saw it"):
        service.create("fresh-job", steps=5)
    service.poll("node-a", procs((41, "fresh-job", 0)))
    assert service.create("fresh-job", steps=5) == 1
    assert service.create("train-7") == 2  # known to the catalog, no agent needed
    assert service.describe(2)["steps"] == 5  # neither steps nor duration: the SDK's default


def test_a_poll_hands_each_matching_pid_to_its_agent_once(
    make_service: Callable[..., ProfilingService],
) -> None:
    service = make_service()
    request_id = service.create("train-7", rank=1, steps=3)
    running = procs((100, "train-7", 0), (101, "train-7", 1), (102, "other", 1))
    (assignment,) = service.poll("node-a", running)
    assert assignment.to_json() == {
        "request_id": request_id,
        "job_id": "train-7",
        "rank": 1,
        "steps": 3,
        "duration_s": None,
        "pids": [101],
    }
    assert service.poll("node-a", running) == []
    described = service.describe(request_id)
    assert (described["state"], described["host"]) == ("running", "node-a")
    assert described["matched"] == [{"host": "node-a", "pid": 101, "rank": 1, "state": "running"}]


def test_nobody_matching_in_time_fails_with_what_every_agent_runs(
    make_service: Callable[..., ProfilingService], clock: Clock
) -> None:
    service = make_service()
    request_id = service.create("idle-job", rank=2, steps=5)
    service.poll("host-a", procs((1, "x", 0), (2, "x", 1), (3, "y", None)))
    service.poll("host-b", [])
    assert service.describe(request_id)["state"] == "pending"
    clock.offset = 16.0
    described = service.describe(request_id)
    assert described["state"] == "failed"
    assert described["error"] == (
        "no processes matched job idle-job rank 2 within 15 s (server.profile_match_timeout_s); "
        "agents polling: host-a (jobs: x[ranks 0,1], y), host-b (no instrumented processes)"
    )


def test_with_no_agent_polling_the_error_says_so(
    make_service: Callable[..., ProfilingService], clock: Clock
) -> None:
    service = make_service()
    request_id = service.create("idle-job", steps=5)
    clock.offset = 16.0
    assert "no agent polled meanwhile" in service.describe(request_id)["error"]


def test_a_request_for_every_rank_is_joined_by_other_hosts_while_young(
    make_service: Callable[..., ProfilingService], clock: Clock
) -> None:
    service = make_service()
    request_id = service.create("train-7", steps=5)
    assert service.poll("node-a", procs((10, "train-7", 0)))[0].pids == (10,)
    assert service.poll("node-b", procs((20, "train-7", 1)))[0].pids == (20,)
    clock.offset = 16.0
    assert service.poll("node-c", procs((30, "train-7", 2))) == []
    hosts = [(m["host"], m["pid"]) for m in service.describe(request_id)["matched"]]
    assert hosts == [("node-a", 10), ("node-b", 20)]


def test_a_trace_goes_to_the_hook_and_its_summary_makes_the_request_done(
    make_service: Callable[..., ProfilingService], tmp_path: Path
) -> None:
    seen: list[TraceUpload] = []
    service = make_service(notify=lambda upload: bool(seen.append(upload)) or True)
    request_id = service.create("train-7", steps=5)
    service.poll("node-a", procs((10, "train-7", 0), (11, "train-7", 1)))
    upload = service.receive_trace(request_id, "node-a", 10, 0, TRACE)
    assert upload.location == str(tmp_path / "traces" / "req1-node-a-pid10.pt.trace.json.gz")
    assert Path(upload.location).read_bytes() == TRACE
    assert service.storage.read_bytes(upload.trace_id) == TRACE
    service.finish(upload, summary={"findings": [{"rule_id": "T8"}]}, analysis={"version": 1})
    assert service.describe(request_id)["state"] == "running"  # pid 11 still owes its trace
    service.poll("node-a", [], [AgentResult(request_id, 11, "the profiler in the process failed")])
    described = service.describe(request_id)
    assert (described["state"], described["trace_id"]) == ("done", "req1-node-a-pid10")
    assert described["error"] == "node-a pid 11: the profiler in the process failed"
    assert described["summary"] == [{"findings": [{"rule_id": "T8"}]}]
    with service.catalog.connect() as conn:
        trace = get_trace(conn, "req1-node-a-pid10")
    assert (trace.job_id, trace.host, trace.rank) == ("train-7", "node-a", 0)
    # the analysis document is stored beside the summary, apart from the traces listing
    with service.catalog.connect() as conn:
        assert get_trace_analysis(conn, "req1-node-a-pid10") == {"version": 1}
        assert get_trace_analysis(conn, "req1-node-a-pid11") is None


def test_the_worker_thread_runs_the_hook_or_finishes_without_one(
    make_service: Callable[..., ProfilingService],
) -> None:
    service = make_service(notify=None)
    service.start()
    try:
        request_id = service.create("train-7", steps=5)
        service.poll("node-a", procs((10, "train-7", 0)))
        service.receive_trace(request_id, "node-a", 10, 0, TRACE)
    finally:
        service.stop()  # drains the queue first
    described = service.describe(request_id)
    assert (described["state"], described["summary"]) == ("done", None)
    assert described["traces"][0]["state"] == "done"


def test_a_hook_that_raises_fails_the_trace_with_its_error(
    make_service: Callable[..., ProfilingService],
) -> None:
    def broken(upload: TraceUpload) -> bool:
        raise RuntimeError("analysis exploded")

    service = make_service(notify=broken)
    service.start()
    try:
        request_id = service.create("train-7", steps=5)
        service.poll("node-a", procs((10, "train-7", 0)))
        service.receive_trace(request_id, "node-a", 10, 0, TRACE)
    finally:
        service.stop()
    described = service.describe(request_id)
    assert described["state"] == "failed"
    assert described["error"] == (
        "node-a pid 10: trace analysis failed: RuntimeError: analysis exploded"
    )


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"{not gzip}", "not a gzip file"),
        (TRACE[:-6], "corrupt gzip"),
        (gzip.compress(b"<html>"), "not a JSON object"),
        (gzip.compress(b" " * 200_000), "inflates past 64x"),
    ],
    ids=("plain text", "truncated gzip", "gzip of HTML", "gzip bomb"),  # gzip bytes hold a time
)
def test_a_corrupt_trace_is_refused_and_fails_the_process_with_the_reason(
    make_service: Callable[..., ProfilingService], body: bytes, reason: str
) -> None:
    service = make_service()
    request_id = service.create("train-7", steps=5)
    service.poll("node-a", procs((10, "train-7", 0)))
    with pytest.raises(IngestError, match=reason) as raised:
        service.receive_trace(request_id, "node-a", 10, 0, body)
    assert raised.value.status == 400
    described = service.describe(request_id)
    assert described["state"] == "failed"
    assert described["error"].startswith("node-a pid 10: the trace from node-a pid 10 is corrupt: ")
    assert reason in described["error"]


def test_traces_nobody_asked_for_are_refused(
    make_service: Callable[..., ProfilingService],
) -> None:
    service = make_service()
    request_id = service.create("train-7", steps=5)
    with pytest.raises(IngestError, match="did not match pid 10 on node-a") as raised:
        service.receive_trace(request_id, "node-a", 10, 0, TRACE)
    assert raised.value.status == 409
    with pytest.raises(NotFoundError, match="no profile request 99"):
        service.receive_trace(99, "node-a", 10, 0, TRACE)


def test_a_running_request_without_progress_expires(
    make_service: Callable[..., ProfilingService], clock: Clock
) -> None:
    service = make_service()
    request_id = service.create("train-7", steps=5)
    service.poll("node-a", procs((10, "train-7", 0)))
    clock.offset = 901.0
    described: dict[str, Any] = service.describe(request_id)
    assert described["state"] == "expired"
    assert described["error"].startswith("no trace from node-a pid 10 within 900 s")
    assert described["matched"][0]["state"] == "failed"


def test_requests_the_dashboard_writes_are_served_the_same_way(
    make_service: Callable[..., ProfilingService],
) -> None:
    service = make_service()
    desk = make_service()  # what dashboard.actions.request_profile builds: a service, no worker
    with pytest.raises(NotFoundError, match="unknown job 'nope'"):
        desk.create("nope", steps=20)
    with desk.catalog.connect() as conn:
        assert list_profile_requests(conn) == []  # refused: nothing written
    request_id = desk.create("train-7", steps=20)
    (assignment,) = service.poll("node-a", procs((10, "train-7", 0)))
    assert (assignment.request_id, assignment.steps, assignment.pids) == (request_id, 20, (10,))
