"""One path for a trace, as the dashboard sees it: its profile requests go through the profiling
service (an unknown job gets the service's error and nothing is written), and a trace analysed on
upload is drawn from the stored analysis, never analysed again unless the HTA toggle asks."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import delete

from dashboard import actions, trace_report
from fleetscope.errors import NotFoundError
from fleetscope.settings import load_settings
from tests.dashboard.conftest import Warehouse, build_warehouse, upload_trace
from tests.dashboard.test_dashboard_pages import _app, _finding_rules, _metrics
from warehouse.catalog import connect
from warehouse.catalog.fleet import jobs
from warehouse.catalog.profiling import list_profile_requests

TRACE_ID = "req1-e2-pid9"


@pytest.fixture
def own_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Warehouse:
    """A warehouse of its own, which this test may write to (the shared one gets a profile
    request from `test_job_page_requests_a_profile`)."""
    built = build_warehouse(tmp_path / "fleet")
    for name, value in built.env.items():
        monkeypatch.setenv(name, value)
    return built


def _requests(data_dir: Path) -> list[tuple[str, str]]:
    engine = connect(f"sqlite:///{data_dir / 'catalog.sqlite'}")
    with engine.connect() as conn:
        found = [(r.job_id, r.state) for r in list_profile_requests(conn)]
    engine.dispose()
    return found


@pytest.fixture
def uploaded(own_warehouse: Warehouse) -> Warehouse:
    """stall-1's trace uploaded through the profiling service and analysed by the server's hook."""
    assert upload_trace(own_warehouse) == TRACE_ID
    return own_warehouse


def test_the_profile_action_for_an_unknown_job_gets_the_service_error(
    own_warehouse: Warehouse,
) -> None:
    settings = load_settings(env=own_warehouse.env)
    with pytest.raises(NotFoundError, match="unknown job 'no-such-job'"):
        actions.request_profile(settings, "no-such-job")
    assert _requests(own_warehouse.data_dir) == []
    assert actions.request_profile(settings, "train-ok") == 1  # a job the catalog knows
    assert _requests(own_warehouse.data_dir) == [("train-ok", "pending")]


def test_the_job_page_shows_the_service_error_and_writes_nothing(
    own_warehouse: Warehouse,
) -> None:
    """train-ok has GPU samples, but the catalog has forgotten it and no agent reports it."""
    engine = connect(f"sqlite:///{own_warehouse.data_dir / 'catalog.sqlite'}")
    with engine.begin() as conn:
        conn.execute(delete(jobs).where(jobs.c.job_id == "train-ok"))
    engine.dispose()
    app = _app("views/job.py", job_id="train-ok")
    app.button(key="request_profile").click().run()
    assert not app.success
    (error,) = [e.value for e in app.error]
    assert error.startswith("Could not request a profile: unknown job 'train-ok'")
    assert _requests(own_warehouse.data_dir) == []


def test_the_trace_page_draws_the_stored_analysis(
    uploaded: Warehouse, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bool] = []
    analyze = trace_report.analyze_document

    def counted(path: Path, *, hta_compatible: bool = False) -> trace_report.Document:
        calls.append(hta_compatible)
        return analyze(path, hta_compatible=hta_compatible)

    monkeypatch.setattr(trace_report, "analyze_document", counted)
    app = _app("views/trace.py", trace_id=TRACE_ID)
    assert calls == []  # drawn from the catalog's trace_analyses, not from the file
    # the numbers `test_traces_and_trace_pages` reads from a fresh analysis of the same file
    assert _metrics(app) == {
        "rank 0: steps": "2",
        "mean step": "4.7 ms",
        "data loader of step time": "0 %",
        "GPU busy span": "8.9 ms",
        "idle": "98.3 %",
        "compute": "1.2 %",
        "GPU ops": "16",
    }
    assert app.dataframe[0].value["duration_ms"].tolist() == pytest.approx([9.288, 0.04907], 1e-3)
    assert app.dataframe[3].value["name"].iloc[0] == "Memcpy HtoD (Host -> Device)"
    assert _finding_rules(app) == ["T1", "T2", "T5", "T10"]
    assert not [c for c in app.caption if "analysed here" in c.value]
    app.toggle(key="hta_compatible").set_value(True).run()
    assert calls == [True]  # only HTA's definitions are analysed on the page
    assert _metrics(app)["rank 0: steps"] == "1"


def test_the_job_page_shows_the_stored_headline_of_its_trace(uploaded: Warehouse) -> None:
    app = _app("views/job.py", job_id="stall-1")
    captions = [c.value for c in app.caption]
    assert (
        "rank 0: 2 steps, mean step 4.7 ms, data loader 0 % · findings: T1, T2, T5, T10" in captions
    )
