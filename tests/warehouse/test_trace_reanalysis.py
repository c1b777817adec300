"""Every stored trace is analysed once, even when the server analysing it stops first.

On a real catalog (SQLite in tmp_path) with an injected clock: servers sharing it take over a
lapsed claim, one of two racing wins, a live claim is left alone, a stopped analyser's late outcome
is dropped, a trace that stopped three analyses fails, the run timeout leaves a stored trace's
process to its analysis. Then a real embedded server stopped with a trace stored and unanalysed:
the next server on the same data folder analyses it at start and stores what an uninterrupted run
stores."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fleetscope.settings import load_settings
from tests.fleet import stalled_analysis
from tests.fleet.conftest import wait_until
from tests.fleet.test_fleet_trace_hooks import ANALYSE_S, RESNET_NW0, embedded_upload
from tests.warehouse.test_profiling_service import TRACE, Clock, procs
from warehouse import catalog
from warehouse.catalog.fleet import Job, upsert_jobs
from warehouse.catalog.profiling import get_trace, get_trace_analysis
from warehouse.ingest.runtime import Server
from warehouse.profiling.agent_registry import ReportedProcess
from warehouse.profiling.analysis_leases import stale_claims, take_over
from warehouse.profiling.service import ProfilingConfig, ProfilingService, TraceUpload

LEASE_S = 60.0


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_service(tmp_path: Path, clock: Clock) -> Callable[..., ProfilingService]:
    """Services on one catalog and traces folder: servers of one fleet, or one server's runs."""
    engine = catalog.connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    with engine.begin() as conn:
        upsert_jobs(conn, [Job("train-7")])

    def make(
        notify: Callable[[TraceUpload], bool] | None = None, *, sole_server: bool = False
    ) -> ProfilingService:
        config = ProfilingConfig(tmp_path / "traces", 1 << 20, 15.0, 900.0, LEASE_S)
        return ProfilingService(engine, config, notify=notify, clock=clock, sole_server=sole_server)

    return make


def stored(service: ProfilingService, *pids: int) -> TraceUpload:
    """A request for train-7 matched on node-a `pids`; the first one's trace stored by `service`
    (its analysis never run: the service's worker is not started, as if it stopped)."""
    request_id = service.create("train-7", steps=5)
    service.poll("node-a", procs(*[(pid, "train-7", 0) for pid in pids]))
    return service.receive_trace(request_id, "node-a", pids[0], 0, TRACE)


def analysing(
    make_service: Callable[..., ProfilingService], seen: list[TraceUpload], **kwargs: Any
) -> tuple[ProfilingService, threading.Event]:
    """A service whose hook finishes each trace with a summary naming it, and says when."""
    done = threading.Event()

    def hook(upload: TraceUpload) -> bool:
        seen.append(upload)
        service.finish(upload, summary={"analysed_by": service.leases.analyser})
        done.set()
        return True

    service = make_service(notify=hook, **kwargs)
    return service, done


def test_the_next_embedded_server_analyses_at_start_what_the_last_one_left(
    make_service: Callable[..., ProfilingService],
) -> None:
    first = make_service(sole_server=True)
    upload = stored(first, 10)
    seen: list[TraceUpload] = []
    second, done = analysing(make_service, seen, sole_server=True)
    second.start()  # no lease to wait for: nobody else shares an embedded catalog
    try:
        assert done.wait(30)
    finally:
        second.stop()

    assert seen == [upload]  # the same trace, as the hook would have had it from the first
    described = second.describe(upload.request_id)
    assert (described["state"], described["error"]) == ("done", None)
    assert described["summary"] == [{"analysed_by": second.leases.analyser}]
    assert described["matched"][0]["analyses"] == 2
    assert not first.finish(upload, summary={"analysed_by": "the first"})  # too late: dropped
    assert not first.holds(upload)
    assert second.describe(upload.request_id)["summary"] == [
        {"analysed_by": second.leases.analyser}
    ]


def test_a_gateway_takes_over_only_a_lapsed_claim_and_of_two_racing_one_wins(
    make_service: Callable[..., ProfilingService], clock: Clock
) -> None:
    a, b, c = make_service(), make_service(), make_service()
    upload = stored(a, 10)
    clock.offset = LEASE_S - 1
    assert b.leases.take_over_stale() == []  # A's claim is young
    a.leases.renew()  # a slow analysis, alive: A says so every quarter lease
    clock.offset = 2 * LEASE_S - 2
    assert b.leases.take_over_stale() == []
    clock.offset = 2 * LEASE_S  # A stopped renewing a lease ago

    with a.catalog.connect() as conn:  # B and C both see the lapsed claim
        seen_b = stale_claims(conn, b.leases.analyser, clock(), LEASE_S, everyone_gone=False)
        seen_c = stale_claims(conn, c.leases.analyser, clock(), LEASE_S, everyone_gone=False)
    assert [s.seen[0] for s in seen_b] == [s.seen[0] for s in seen_c] == [a.leases.analyser]
    with a.catalog.begin() as conn:
        won = take_over(conn, seen_b[0], b.leases.analyser, clock())
    with a.catalog.begin() as conn:
        lost = take_over(conn, seen_c[0], c.leases.analyser, clock())  # B's claim is there now
    assert won is not None and (won.trace_id, won.location, won.analyses) == (
        upload.trace_id,
        upload.location,
        2,
    )
    assert lost is None
    entry = b.describe(upload.request_id)["matched"][0]
    assert (entry["state"], entry["analyser"], entry["analyses"]) == (
        "analyzing",
        b.leases.analyser,
        2,
    )
    assert not a.finish(upload, summary={"from": "A"})  # A was slow, not dead: its outcome drops
    assert b.finish(upload, summary={"from": "B"})
    assert b.describe(upload.request_id)["summary"] == [{"from": "B"}]


def test_a_lapsed_claim_is_analysed_by_the_gateway_that_took_it_over_once(
    make_service: Callable[..., ProfilingService], clock: Clock
) -> None:
    a = make_service()
    upload = stored(a, 10)
    seen: list[TraceUpload] = []
    b, done = analysing(make_service, seen)
    clock.offset = LEASE_S + 1
    b.start()  # its lease thread finds A's claim lapsed, its worker analyses the trace
    try:
        assert done.wait(30)
    finally:
        b.stop()
    assert seen == [upload]
    with a.catalog.connect() as conn:
        assert get_trace(conn, upload.trace_id).summary == {"analysed_by": b.leases.analyser}


def test_a_trace_whose_analysis_stopped_three_servers_fails_its_process(
    make_service: Callable[..., ProfilingService], clock: Clock
) -> None:
    upload = stored(make_service(), 10, 11)
    for n in (1, 2):
        clock.offset = n * (LEASE_S + 1)
        assert [t.analyses for t in make_service().leases.take_over_stale()] == [n + 1]
    clock.offset = 3 * (LEASE_S + 1)
    last = make_service()
    assert last.leases.take_over_stale() == []
    entry = last.describe(upload.request_id)["matched"][0]
    assert (entry["state"], entry["error"]) == (
        "failed",
        "its trace was stored; 3 analyses of it were started and none finished "
        "(the server analysing it stopped each time)",
    )


def test_the_run_timeout_fails_late_processes_and_leaves_a_stored_trace_to_its_analysis(
    make_service: Callable[..., ProfilingService], clock: Clock
) -> None:
    service = make_service()
    upload = stored(service, 10, 11)
    clock.offset = 901.0
    described = service.describe(upload.request_id)
    assert described["state"] == "running"
    assert [(e["state"], e.get("error")) for e in described["matched"]] == [
        ("analyzing", None),
        ("failed", "no trace arrived within 900 s (server.profile_run_timeout_s)"),
    ]
    clock.offset = 9000.0  # an analysis longer than any timeout, its claim renewed meanwhile
    service.leases.renew()
    assert service.describe(upload.request_id)["state"] == "running"

    assert service.finish(upload, summary={"findings": []})
    described = service.describe(upload.request_id)
    assert (described["state"], described["error"]) == (
        "done",
        "node-a pid 11: no trace arrived within 900 s (server.profile_run_timeout_s)",
    )


def test_an_embedded_server_stopped_mid_analysis_has_the_next_one_analyse_the_trace(
    tmp_path: Path, test_server_plugins: None
) -> None:
    """A real server on a data folder stores the resnet trace and stops before its analysis
    finished (its hook stalls, then returns without a finish: what a killed server leaves); a new
    server on the same folder analyses it at start: done, with what an uninterrupted run stores,
    although the run timeout passed many times over meanwhile."""
    body = RESNET_NW0.read_bytes()
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "data"),
        server__port=0,
        server__profile_run_timeout_s=0.5,
        warehouse__maintenance_interval_s=3600.0,
    )
    stalled_analysis.RELEASE.clear()
    stalled_analysis.STARTED.clear()
    first = Server(settings.with_overrides(server__plugins="tests.fleet.stalled_analysis"))
    first.start()
    try:
        first.profiling.poll("node-a", [ReportedProcess(9, "train-1", 0)])
        request_id = first.profiling.create("train-1")
        first.profiling.poll("node-a", [ReportedProcess(9, "train-1", 0)])
        upload = first.profiling.receive_trace(request_id, "node-a", 9, 0, body)
        assert stalled_analysis.STARTED.wait(30)
    finally:
        stalled_analysis.RELEASE.set()
        first.stop()
    assert first.profiling.describe(request_id)["state"] == "running"  # not expired: stored

    second = Server(settings.with_overrides(server__plugins="analyzers.traces.service"))
    second.start()
    try:
        wait_until(
            lambda: second.profiling.describe(request_id)["state"] != "running",
            ANALYSE_S,
            "the analysis by the next server",
        )
        request = second.profiling.describe(request_id)
        with second.catalog.connect() as conn:
            document = get_trace_analysis(conn, upload.trace_id)
    finally:
        second.stop()
    assert (request["state"], request["error"]) == ("done", None)
    assert [f["rule_id"] for f in request["summary"][0]["findings"] if f["rule_id"] == "T8"] == [
        "T8"
    ]
    assert request["matched"][0]["analyser"] == second.profiling.leases.analyser
    expected_summary, expected_document = embedded_upload(tmp_path, body)
    assert request["summary"] == [expected_summary]
    assert document == expected_document
