"""Server plug-ins on fleet gateways (real PostgreSQL, a real S3 server, gateways over HTTP): a trace
uploaded to a gateway is analysed there once, its summary and analysis document the ones an
embedded server stores for the same file, read through another gateway; a gateway that stops
mid-analysis has another analyse the trace, once; two gateways running the closed loop request
one profile per trigger finding (one leads the tick, the other takes over when it stops); a
plug-in a gateway cannot run is refused by name before the gateway opens anything."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from analyzers.findings import Finding, Severity
from analyzers.run.results import to_catalog
from fleetscope.errors import ConfigError
from fleetscope.settings import Settings, load_settings
from tests.fleet import counted_analysis, stalled_analysis
from tests.fleet.conftest import wait_until
from tests.fleet.test_fleet_profiling import create, proc, request_state, settled, upload
from tests.warehouse.test_profiling_api import poll
from warehouse.catalog import autoprofile as chain
from warehouse.catalog import findings as cat
from warehouse.catalog.profiling import get_trace_analysis, profile_requests
from warehouse.fleet.gateway import Gateway
from warehouse.ingest.plugin_host import load_plugins
from warehouse.ingest.runtime import Server
from warehouse.profiling.agent_registry import ReportedProcess

RESNET_NW0 = (
    Path(__file__).resolve().parents[1]
    / "data/traces/kineto_resnet50_nw0/worker0.1623143089861.pt.trace.json.gz"
)
ANALYSE_S = 180  # the resnet trace's analysis on a busy 2-core machine, with room to spare


def two_gateways(settings: Settings, tmp_path: Path) -> tuple[Gateway, Gateway]:
    """Gateways A and B on the same catalog and bucket, each with its own data folder."""
    a = Gateway(settings.with_overrides(core__data_dir=str(tmp_path / "gw-a")))
    b = Gateway(settings.with_overrides(core__data_dir=str(tmp_path / "gw-b")))
    a.start()
    b.start()
    return a, b


@pytest.fixture
def analysing(fleet_settings: Settings, tmp_path: Path) -> Iterator[tuple[Gateway, Gateway]]:
    """Two gateways with the default selection (`*`): the plug-ins a gateway can run."""
    a, b = two_gateways(fleet_settings.with_overrides(server__plugins="*"), tmp_path)
    try:
        yield a, b
    finally:
        a.stop()
        b.stop()


def embedded_upload(tmp_path: Path, body: bytes) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The summary and analysis document an embedded server stores for `body`, uploaded for
    request 1 by node-a pid 9 (the same trace id the fleet test's upload gets)."""
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "embedded"),
        server__port=0,
        server__plugins="analyzers.traces.service",
        warehouse__maintenance_interval_s=3600.0,
    )
    server = Server(settings)
    server.start()
    try:
        server.profiling.poll("node-a", [ReportedProcess(9, "train-1", 0)])
        request_id = server.profiling.create("train-1")
        server.profiling.poll("node-a", [ReportedProcess(9, "train-1", 0)])
        server.profiling.receive_trace(request_id, "node-a", 9, 0, body)
        wait_until(
            lambda: server.profiling.describe(request_id)["state"] != "running",
            ANALYSE_S,
            "the embedded server's analysis",
        )
        request = server.profiling.describe(request_id)
        assert (request["state"], request["error"]) == ("done", None)
        with server.catalog.connect() as conn:
            document = get_trace_analysis(conn, "req1-node-a-pid9")
        return request["summary"][0], document
    finally:
        server.stop()


def test_a_trace_uploaded_to_a_gateway_is_analysed_there_and_read_through_another(
    analysing: tuple[Gateway, Gateway], tmp_path: Path
) -> None:
    a, b = analysing
    body = RESNET_NW0.read_bytes()
    poll(a, "node-a", [proc(9, "train-1")])
    request_id = create(b, "train-1")
    assert poll(a, "node-a", [proc(9, "train-1")])["requests"][0]["pids"] == [9]

    status, stored = upload(a, request_id, "node-a", 9, body)

    assert (request_id, status, stored["trace_id"]) == (1, 201, "req1-node-a-pid9")
    wait_until(
        lambda: request_state(b, request_id)["state"] != "running", ANALYSE_S, "the analysis"
    )
    request = request_state(b, request_id)
    assert (request["state"], request["error"]) == ("done", None)
    (summary,) = request["summary"]
    assert [f["rule_id"] for f in summary["findings"] if f["rule_id"] == "T8"] == ["T8"]
    expected_summary, expected_document = embedded_upload(tmp_path, body)
    assert summary == expected_summary
    with b.catalog.connect() as conn:
        assert get_trace_analysis(conn, "req1-node-a-pid9") == expected_document
    assert expected_document is not None
    assert (tmp_path / "gw-a" / "trace_cache").is_dir()  # analysed where it landed, once
    assert not (tmp_path / "gw-b" / "trace_cache").exists()


def test_a_gateway_stopped_mid_analysis_has_another_analyse_the_trace_once(
    fleet_settings: Settings, tmp_path: Path, test_server_plugins: None
) -> None:
    """Gateway A stores the trace and stops in the middle of its analysis (its worker stalls in a
    hook before the trace service's); B takes the analysis over once A's lease lapses and runs
    every hook: the summary, the closed loop's evidence and refined findings, stored once. A's
    worker, let go afterwards, runs no further hook: the trace is B's. The run timeout passed
    many times over meanwhile; a stored trace does not expire."""
    settings = fleet_settings.with_overrides(
        server__profile_run_timeout_s=1.0,
        server__profile_analysis_lease_s=2.0,
        autoprofile__enabled=True,
        autoprofile__periodic=False,
        autoprofile__tick_s=3600.0,  # no tick: the test links the request to its finding
    )
    hooks = "analyzers.traces.service,analyzers.autoprofile.plugin,tests.fleet.counted_analysis"
    stalled_analysis.RELEASE.clear()
    stalled_analysis.STARTED.clear()
    counted_analysis.ran_on.clear()
    a = Gateway(
        settings.with_overrides(
            core__data_dir=str(tmp_path / "gw-a"),
            server__plugins=f"tests.fleet.stalled_analysis,{hooks}",
        )
    )
    b = Gateway(
        settings.with_overrides(core__data_dir=str(tmp_path / "gw-b"), server__plugins=hooks)
    )
    a.start()
    b.start()
    stopping = threading.Thread(target=a.stop)
    try:
        stall = stall_finding("stall-1")
        poll(a, "node-a", [proc(9, "stall-1")])
        request_id = create(a, "stall-1")
        with a.catalog.begin() as conn:
            cat.upsert_findings(conn, [to_catalog(stall)], run_id="test")
            chain.record_auto_profile(
                conn, request_id=request_id, job_id="stall-1", team="vision", reason="triggered",
                gpu_seconds=60.0, finding_id=stall.finding_id, rule_id="P1",
            )  # fmt: skip
        poll(a, "node-a", [proc(9, "stall-1")])
        assert upload(a, request_id, "node-a", 9, RESNET_NW0.read_bytes())[0] == 201
        assert stalled_analysis.STARTED.wait(30)  # A analyses it, and stops before it finishes
        stopping.start()  # A stops renewing its lease at once; its worker stays stalled

        wait_until(
            lambda: request_state(b, request_id)["state"] != "running", ANALYSE_S, "B's analysis"
        )
        wait_until(lambda: counted_analysis.ran_on, 60, "B's hooks after the trace service's")
        stalled_analysis.RELEASE.set()  # A's worker goes on, to find the trace is B's now
        stopping.join(60)
        assert not stopping.is_alive()

        request = request_state(b, request_id)
        assert (request["state"], request["error"]) == ("done", None)
        (entry,) = request["matched"]
        assert (entry["analyser"], entry["analyses"]) == (b.profiling.leases.analyser, 2)
        (summary,) = request["summary"]
        assert [f["rule_id"] for f in summary["findings"] if f["rule_id"] == "T8"] == ["T8"]
        assert summary["trace_id"] == "req1-node-a-pid9"
        assert counted_analysis.ran_on == [(b.profiling.leases.analyser, "req1-node-a-pid9")]
        with b.catalog.connect() as conn:
            (link,) = chain.auto_profiles_of(conn, request_id=request_id)
            refined = [
                f.rule_id
                for f in cat.list_findings(conn, job_id="stall-1")
                if f.run_id == "autoprofile"
            ]
        assert [f["rule_id"] for f in (link.evidence or {})["trace_findings"]] == ["T8"]
        assert refined == ["T8"]
        assert (tmp_path / "gw-b" / "trace_cache").is_dir()
    finally:
        stalled_analysis.RELEASE.set()
        if stopping.ident is None:  # failed before A was stopped
            a.stop()
        else:
            stopping.join(60)
        b.stop()


def stall_finding(job: str) -> Finding:
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    return Finding(
        "P1", Severity.CRITICAL, job, "node-a", ("0",), hour, hour + timedelta(hours=1),
        "data-loader stall", "raise num_workers", 0.4, "data wait share x GPU-hours",
        {"data_wait_share": 0.4}, team="vision",
    )  # fmt: skip


def profile_request_count(gateway: Gateway) -> int:
    with gateway.catalog.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(profile_requests)).scalar_one())


def test_two_gateways_running_the_closed_loop_request_one_profile_per_trigger_finding(
    fleet_settings: Settings, tmp_path: Path
) -> None:
    settings = fleet_settings.with_overrides(
        server__plugins="analyzers.traces.service,analyzers.autoprofile.plugin",
        autoprofile__enabled=True,
        autoprofile__periodic=False,
        autoprofile__tick_s=0.05,
        server__profile_match_timeout_s=120.0,  # the request waits for the test's poll
    )
    a, b = two_gateways(settings, tmp_path)
    loops: dict[Gateway, Any] = {a: a.autoprofiler, b: b.autoprofiler}  # type: ignore[attr-defined]
    stopped: list[Gateway] = []
    try:
        stall = stall_finding("stall-1")
        with a.catalog.begin() as conn:
            cat.upsert_findings(conn, [to_catalog(stall)], run_id="test")
        poll(b, "node-a", [proc(9, "stall-1")])  # the SDK is attached to the job

        wait_until(lambda: profile_request_count(a) > 0, 60, "a profile request")
        seen = {gw: loop.rounds for gw, loop in loops.items()}
        wait_until(
            lambda: all(loop.rounds >= seen[gw] + 20 for gw, loop in loops.items()),
            60,
            "20 more rounds of both loops",
        )
        assert profile_request_count(b) == 1
        with a.catalog.connect() as conn:
            (link,) = chain.auto_profiles_of(conn, finding_id=stall.finding_id)
        leaders = [gw for gw, loop in loops.items() if loop.led > 0]
        assert len(leaders) == 1
        leader = leaders[0]
        follower = b if leader is a else a

        (handed,) = poll(follower, "node-a", [proc(9, "stall-1")])["requests"]
        assert (handed["request_id"], handed["steps"]) == (link.request_id, 5)
        upload(follower, link.request_id, "node-a", 9, RESNET_NW0.read_bytes())
        assert settled(leader, link.request_id)["state"] == "done"

        def evidence() -> dict[str, Any] | None:
            with leader.catalog.connect() as conn:
                return chain.auto_profiles_of(conn, finding_id=stall.finding_id)[0].evidence

        wait_until(lambda: evidence() is not None, ANALYSE_S, "the trace's evidence on the chain")
        assert [f["rule_id"] for f in (evidence() or {})["trace_findings"]] == ["T8"]

        stopped.append(leader)
        leader.stop()  # the follower takes the tick over; the finding was asked for already
        wait_until(lambda: loops[follower].led > 0, 60, "the other gateway leading")
        done = loops[follower].led
        wait_until(lambda: loops[follower].led >= done + 20, 60, "20 ticks of the new leader")
        assert profile_request_count(follower) == 1
    finally:
        for gw in (a, b):
            if gw not in stopped:
                gw.stop()


def test_every_plugin_a_gateway_can_run_is_the_default_and_one_it_cannot_is_refused_by_name(
    tmp_path: Path,
) -> None:
    assert [setup.__module__ for setup in load_plugins("*", mode="fleet")] == [
        "analyzers.traces.service",
        "analyzers.prometheus_export",
        "analyzers.read_api",
        "analyzers.notify",
        "analyzers.autoprofile.plugin",
    ]
    # Nothing is reachable at these addresses: the refusal comes before anything is opened.
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path),
        server__mode="fleet",
        server__port=0,
        warehouse__catalog_url="postgresql+psycopg2://postgres@127.0.0.1:1/none",
        fleet__warehouse_uri="s3://nowhere/warehouse",
        fleet__s3_endpoint="http://127.0.0.1:1",
    )
    for name in ("analyzers.reports.scheduled", "analyzers.run.embedded"):
        with pytest.raises(ConfigError) as refused:
            Gateway(settings.with_overrides(server__plugins=f"*,{name}"))
        assert str(refused.value) == (
            f"server.plugins: {name} (runs on: embedded) cannot run with server.mode = 'fleet'; "
            "leave it out of server.plugins there (`*` loads only the plug-ins such a server runs)"
        )
