"""The catalog on SQLite (the default) and on PostgreSQL, through the same typed functions."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import OperationalError

from fleetscope.errors import ConfigError, NotFoundError
from warehouse.catalog import analysis, connect, findings, fleet, profiling, reports, tokens

PG_URL = "postgresql+psycopg2://postgres@127.0.0.1:5432/test"
T0 = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)


@pytest.fixture(
    params=["sqlite", pytest.param("postgresql", marks=pytest.mark.real_component("postgres"))]
)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    if request.param == "sqlite":
        catalog = connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
        with catalog.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        yield catalog
        catalog.dispose()
        return
    schema = f"fs_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    try:
        with admin.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
    except OperationalError as exc:
        admin.dispose()
        pytest.skip(f"PostgreSQL at 127.0.0.1:5432 is not reachable: {exc.orig}")
    catalog = connect(f"{PG_URL}?options=-csearch_path%3D{schema}")
    try:
        yield catalog
    finally:
        catalog.dispose()
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def test_partial_job_records_never_erase_known_fields(engine: Engine) -> None:
    with engine.begin() as conn:
        fleet.upsert_jobs(conn, [fleet.Job("j1", user="ada", team="vision", start_ts=T0)])
        fleet.upsert_jobs(conn, [fleet.Job("j1", end_ts=T0 + timedelta(hours=2), gpus=8)])
        fleet.upsert_jobs(conn, [fleet.Job("j2", user="bob", start_ts=T0 + timedelta(days=1))])
    with engine.connect() as conn:
        assert fleet.get_job(conn, "j1") == fleet.Job(
            "j1", user="ada", team="vision", start_ts=T0, end_ts=T0 + timedelta(hours=2), gpus=8
        )
        window = fleet.list_jobs(conn, start=T0 + timedelta(hours=1), end=T0 + timedelta(hours=3))
        assert [j.job_id for j in window] == ["j1"]
        assert fleet.get_job(conn, "nope") is None


def test_hosts_and_allocations_keep_the_widest_time_span(engine: Engine) -> None:
    later = T0 + timedelta(minutes=5)
    with engine.begin() as conn:
        fleet.record_hosts(conn, [fleet.HostSeen("n1", "c", T0, later, "0.1.0", "b1")])
        fleet.record_hosts(
            conn, [fleet.HostSeen("n1", None, T0 - timedelta(minutes=1), T0, None, "b2")]
        )
        fleet.record_allocations(conn, [fleet.Allocation("j1", "n1", 3, "GPU-3", None, T0, later)])
        fleet.record_allocations(
            conn,
            [
                fleet.Allocation(
                    "j1",
                    "n1",
                    3,
                    None,
                    "1g.10gb",
                    T0 + timedelta(minutes=1),
                    later + timedelta(minutes=1),
                )
            ],
        )
    with engine.connect() as conn:
        assert fleet.list_hosts(conn) == [
            fleet.HostSeen("n1", "c", T0 - timedelta(minutes=1), later, "0.1.0", "b2")
        ]
        assert fleet.allocations(conn, host="n1") == [
            fleet.Allocation("j1", "n1", 3, "GPU-3", "1g.10gb", T0, later + timedelta(minutes=1))
        ]


def test_tokens_are_stored_hashed_shown_once_and_revocable(engine: Engine) -> None:
    with engine.begin() as conn:
        token = tokens.create_token(conn, "rack-12")
        with (
            pytest.raises(ConfigError, match="a token named 'rack-12' already exists"),
            conn.begin_nested(),
        ):
            tokens.create_token(conn, "rack-12")
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT token_sha256 FROM agent_tokens")).scalar()
        assert stored == tokens.digest(token) and token not in str(stored)
        assert tokens.token_name(conn, token) == "rack-12"
        assert tokens.token_name(conn, token + "x") is None
    with engine.begin() as conn:
        tokens.revoke_token(conn, "rack-12")
        with pytest.raises(NotFoundError, match="no active token named 'rack-12'"):
            tokens.revoke_token(conn, "rack-12")
    with engine.connect() as conn:
        assert tokens.token_name(conn, token) is None
        [info] = tokens.list_tokens(conn)
        assert info.name == "rack-12" and info.revoked_at is not None


def _finding(wasted: float, **changes: object) -> findings.Finding:
    base = findings.Finding(
        finding_id="idle:j1:n1:0-7:2026-03-02",
        rule_id="idle_allocation",
        severity="high",
        window_start=T0,
        window_end=T0 + timedelta(hours=1),
        wasted_gpu_hours=wasted,
        job_id="j1",
        user="ada",
        team="vision",
        host="n1",
        gpus=[0, 1, 2, 3, 4, 5, 6, 7],
        estimate_method="idle_gpu_seconds",
        evidence={"gpu_util_mean": 0.4},
        recommendation="release the allocation",
    )
    return findings.Finding(**{**base.__dict__, **changes})


def test_findings_rerun_refreshes_evidence_but_keeps_state_and_first_seen(engine: Engine) -> None:
    with engine.begin() as conn:
        findings.upsert_findings(conn, [_finding(6.0)], run_id="r1", now=T0)
        findings.set_finding_state(conn, "idle:j1:n1:0-7:2026-03-02", "acknowledged")
        findings.upsert_findings(
            conn,
            [_finding(7.5, window_end=T0 + timedelta(hours=2))],
            run_id="r2",
            now=T0 + timedelta(hours=1),
        )
    with engine.connect() as conn:
        [found] = findings.list_findings(conn)
    assert (found.state, found.first_seen, found.last_seen) == (
        "acknowledged",
        T0,
        T0 + timedelta(hours=1),
    )
    assert (found.wasted_gpu_hours, found.run_id, found.window_end) == (
        7.5,
        "r2",
        T0 + timedelta(hours=2),
    )
    assert found.gpus == [0, 1, 2, 3, 4, 5, 6, 7] and found.evidence == {"gpu_util_mean": 0.4}
    with engine.begin() as conn, pytest.raises(ConfigError, match="finding state must be one of"):
        findings.set_finding_state(conn, found.finding_id, "closed")  # type: ignore[arg-type]


def test_findings_of_a_window_are_those_overlapping_it(engine: Engine) -> None:
    """[since, until) reads the findings whose window overlaps it: one that ends at `since` or
    starts at `until` belongs to the window before or after."""
    hours = [T0 + timedelta(hours=h) for h in range(4)]
    with engine.begin() as conn:
        findings.upsert_findings(
            conn,
            [
                _finding(
                    1.0,
                    finding_id=f"f{h}",
                    window_start=start,
                    window_end=start + timedelta(hours=1),
                )
                for h, start in enumerate(hours)
            ],
            run_id="r1",
            now=T0,
        )
    with engine.connect() as conn:
        found = findings.list_findings(conn, since=hours[1], until=hours[3])
        later = findings.list_findings(conn, since=hours[1])
    assert [f.finding_id for f in found] == ["f1", "f2"]
    assert [f.finding_id for f in later] == ["f1", "f2", "f3"]


def test_suppressions_match_by_scope_and_optional_rule(engine: Engine) -> None:
    with engine.begin() as conn:
        findings.add_suppression(conn, "team", "vision", rule_id="small_batch", reason="known")
        findings.add_suppression(conn, "user", "ada", reason="on leave")
        with pytest.raises(ConfigError, match="suppression scope must be one of"):
            findings.add_suppression(conn, "cluster", "x")  # type: ignore[arg-type]
    with engine.connect() as conn:
        rules = findings.list_suppressions(conn)
    assert [(r.scope, r.value, r.rule_id) for r in rules] == [
        ("team", "vision", "small_batch"),
        ("user", "ada", None),
    ]
    assert findings.is_suppressed(_finding(1.0), rules)
    assert not findings.is_suppressed(_finding(1.0, user="bob"), rules)
    assert findings.is_suppressed(_finding(1.0, user="bob", rule_id="small_batch"), rules)


def test_watermarks_never_move_backwards_and_runs_are_recorded(engine: Engine) -> None:
    with engine.begin() as conn:
        analysis.set_watermark(conn, "idle", "c1", T0 + timedelta(hours=1))
        analysis.set_watermark(conn, "idle", "c1", T0)
        analysis.start_run(conn, "r1", "idle", T0, T0 + timedelta(hours=1), partition="c1")
        analysis.finish_run(conn, "r1", findings=3, stats={"rows": 10})
        with pytest.raises(NotFoundError):
            analysis.finish_run(conn, "r9")
    with engine.connect() as conn:
        assert analysis.get_watermark(conn, "idle", "c1") == T0 + timedelta(hours=1)
        assert analysis.get_watermark(conn, "idle", "c2") is None
        [run] = analysis.list_runs(conn, "idle")
    assert (run.state, run.findings, run.stats, run.error) == ("ok", 3, {"rows": 10}, None)


def test_profile_requests_and_traces(engine: Engine) -> None:
    with engine.begin() as conn:
        rid = profiling.create_profile_request(conn, "j1", rank=0, steps=20, host="n1")
        profiling.update_profile_request(
            conn, rid, state="done", trace_id="t1", matched={"pid": 42}
        )
        profiling.record_trace(
            conn, profiling.Trace("t1", "j1", "n1", 0, "traces/t1.json.gz", T0, {"steps": 20})
        )
        with pytest.raises(ValueError, match="cannot update"):
            profiling.update_profile_request(conn, rid, job_id="other")
    with engine.connect() as conn:
        [request] = profiling.list_profile_requests(conn, state="done", host="n1")
        assert (request.trace_id, request.matched) == ("t1", {"pid": 42})
        assert profiling.get_trace(conn, "t1").summary == {"steps": 20}
        with pytest.raises(NotFoundError):
            profiling.get_trace(conn, "t2")


def test_a_weekly_report_is_claimed_once(engine: Engine) -> None:
    with engine.begin() as conn:
        assert reports.claim_report_run(conn, "weekly", "team:vision", "2026-W10")
        assert not reports.claim_report_run(conn, "weekly", "team:vision", "2026-W10")
        reports.mark_report_sent(
            conn, "weekly", "team:vision", "2026-W10", sent_at=T0, recipients="a@x", path="r.pdf"
        )
    with engine.connect() as conn:
        [run] = reports.list_report_runs(conn, "weekly")
    assert (run.sent_at, run.recipients, run.path) == (T0, "a@x", "r.pdf")


def test_a_malformed_catalog_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="is not a SQLAlchemy URL"):
        connect("not a url")
