"""The closed loop (issue 18) in a real ingest server: a P1 finding on an SDK-attached job
requests a profile within the budget, the uploaded trace is analyzed, and the chain holds the
trace's evidence (kernels, trace findings, the what-if price); the refining trace finding enters
the ranking counted once with P1. The budget and opt-outs decide exactly as stated."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from analyzers.autoprofile.policy import Budget, Candidate, Past, decide
from analyzers.findings import Finding, Severity
from analyzers.reports.ranking import rank
from analyzers.run.results import from_catalog, to_catalog
from fleetscope.settings import load_settings
from warehouse.catalog import autoprofile as chain
from warehouse.catalog import findings as cat
from warehouse.ingest.runtime import Server
from warehouse.profiling.agent_registry import ReportedProcess

RESNET_NW0 = (
    Path(__file__).resolve().parents[1]
    / "data/traces/kineto_resnet50_nw0/worker0.1623143089861.pt.trace.json.gz"
)
NOW = datetime.now(UTC).replace(microsecond=0)
HOUR = NOW.replace(minute=0, second=0) - timedelta(hours=1)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    settings = load_settings(env={}).with_overrides(
        core__data_dir=str(tmp_path / "data"),
        server__port=0,
        server__plugins="analyzers.traces.service,analyzers.autoprofile.plugin",
        warehouse__maintenance_interval_s=3600.0,
        autoprofile__enabled=True,
        autoprofile__tick_s=3600.0,  # the test ticks by hand
        autoprofile__opt_out="secret-job",
    )
    running = Server(settings)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def _stall(job: str) -> Finding:
    return Finding(
        "P1", Severity.CRITICAL, job, "node-a", ("0",), HOUR, HOUR + timedelta(hours=1),
        "data-loader stall", "raise num_workers", 0.4, "data wait share x GPU-hours",
        {"data_wait_share": 0.4}, team="vision",
    )  # fmt: skip


def _wait_for_evidence(server: Server, finding_id: str) -> chain.AutoProfile:
    deadline = time.monotonic() + 120
    while True:
        with server.catalog.connect() as conn:
            (link,) = chain.auto_profiles_of(conn, finding_id=finding_id)
        if link.evidence is not None:
            return link
        assert time.monotonic() < deadline, link
        time.sleep(0.05)


def test_a_stall_finding_gets_a_profile_and_the_trace_evidence(server: Server) -> None:
    loop: Any = server.autoprofiler  # type: ignore[attr-defined]
    stall, secret = _stall("stall-1"), _stall("secret-job")
    with server.catalog.begin() as conn:
        cat.upsert_findings(conn, [to_catalog(stall), to_catalog(secret)], run_id="t")
    processes = [ReportedProcess(9, "stall-1", 0), ReportedProcess(10, "secret-job", 0)]
    server.profiling.poll("node-a", processes)

    decisions = {(d.candidate.job_id, d.candidate.reason): d for d in loop.tick(NOW)}
    assert decisions[("stall-1", "triggered")].approved
    assert decisions[("stall-1", "periodic")].why == "already profiled in this round"
    assert decisions[("secret-job", "triggered")].why == "opted out"
    with server.catalog.connect() as conn:
        (link,) = chain.auto_profiles_of(conn, finding_id=stall.finding_id)
    assert (link.reason, link.rule_id, link.gpu_seconds) == ("triggered", "P1", 30.0)

    (assignment,) = server.profiling.poll("node-a", processes)
    assert (assignment.request_id, assignment.steps) == (link.request_id, 5)
    server.profiling.receive_trace(link.request_id, "node-a", 9, 0, RESNET_NW0.read_bytes())
    link = _wait_for_evidence(server, stall.finding_id)
    evidence = link.evidence or {}
    assert [f["rule_id"] for f in evidence["trace_findings"]] == ["T8"]
    assert evidence["price"]["scenario"] == "dataloader_workers"
    assert evidence["price"]["estimated_step_ms"] == pytest.approx(128.1, abs=0.1)
    assert evidence["top_kernels"][0]["name"].startswith("void cudnn::detail::dgrad_engine")

    # the refining T8 finding sits on P1's job and bucket: the ranking counts the job once
    with server.catalog.connect() as conn:
        stored = [from_catalog(r).finding for r in cat.list_findings(conn, job_id="stall-1")]
    assert sorted(f.rule_id for f in stored) == ["P1", "T8"]
    t8 = next(f for f in stored if f.rule_id == "T8")
    assert (t8.bucket_start, t8.team) == (HOUR, "vision")
    # priced on P1's hour, not the trace's weekly rate: the ranking adds GPU-hours of windows
    per_week = t8.evidence["gpu_hours_saved_per_week"]
    assert per_week > 1.0
    assert t8.wasted_gpu_hours == pytest.approx(per_week / 168.0)
    report = rank(stored, by="team")
    assert report.total_gpu_hours == pytest.approx(max(f.wasted_gpu_hours for f in stored))

    # the job was just profiled: the next tick asks for nothing more
    assert not any(d.approved for d in loop.tick(NOW + timedelta(minutes=1)))


def test_budget_team_limit_and_job_interval() -> None:
    budget = Budget(gpu_seconds_per_day=100.0, team_profiles_per_day=1, job_interval_s=3600.0,
                    profile_seconds=30.0)  # fmt: skip
    past = [Past("old", "a", 30.0, NOW - timedelta(minutes=30))]
    wanted = [
        Candidate("old", 1, "triggered", team="b", wasted_gpu_hours=9.0),
        Candidate("wide", 4, "triggered", team="c", wasted_gpu_hours=5.0),  # 120 GPU-s
        Candidate("x", 1, "triggered", team="a", wasted_gpu_hours=1.0),
        Candidate("y", 1, "periodic", team="d"),
        Candidate("z", 1, "periodic", team="e"),
    ]
    why = {d.candidate.job_id: (d.approved, d.why) for d in decide(wanted, past, budget, NOW)}
    assert why["old"][1].startswith("job profiled at")
    assert why["wide"] == (False, "fleet budget: 30 of 100 GPU-s used today")
    assert why["x"] == (False, "team a at its daily limit")
    assert why["y"] == (True, "within budget")
    assert why["z"] == (True, "within budget")  # 30 + 30 + 30 = 90 <= 100


def test_periodic_sampling_profiles_an_attached_job_and_ranks_its_trace_findings(
    server: Server,
) -> None:
    """No finding: the periodic sampler profiles the SDK-attached job once; the trace's findings
    are stored in the analyzers' bucket the request was made in."""
    loop: Any = server.autoprofiler  # type: ignore[attr-defined]
    processes = [ReportedProcess(11, "steady-1", 0)]
    server.profiling.poll("node-b", processes)
    (decision,) = loop.tick(NOW)
    assert (decision.candidate.reason, decision.approved) == ("periodic", True)
    with server.catalog.connect() as conn:
        (link,) = chain.auto_profiles_since(conn, NOW - timedelta(minutes=1))
    server.profiling.poll("node-b", processes)
    server.profiling.receive_trace(link.request_id, "node-b", 11, 0, RESNET_NW0.read_bytes())
    deadline = time.monotonic() + 120
    while True:
        with server.catalog.connect() as conn:
            stored = [from_catalog(r).finding for r in cat.list_findings(conn, job_id="steady-1")]
        if stored:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    bucket_s = server.settings.analyzers.bucket_s
    assert {f.rule_id for f in stored} >= {"T8", "T10"}  # every trace finding, not a subset
    assert all(f.bucket_start is not None for f in stored)
    assert {f.bucket_start.timestamp() % bucket_s for f in stored if f.bucket_start} == {0.0}
    assert not any(d.approved for d in loop.tick(NOW + timedelta(hours=1)))  # once a day
