"""The Sharing page shows `fleetscope plan sharing`'s plan; the job page shows a finding's closed-loop
chain (issue 18)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from simulator.maker.tables import publish
from tests.analyzers.test_sharing import _known_fleet
from tests.dashboard.test_dashboard_pages import _metrics

APP = str(Path(__file__).parents[2] / "dashboard" / "app.py")


def test_sharing_page_shows_the_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    publish(_known_fleet(), tmp_path / "segments")
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(tmp_path))
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    app.switch_page("views/sharing.py")
    app.run()
    assert not app.exception, app.exception
    assert app.title[0].value == "GPU sharing"
    metrics = _metrics(app)
    assert metrics["GPUs freed"] == "3"
    assert metrics["Co-locations"] == "2"
    table = app.dataframe[0].value
    assert sorted(table["job_id"]) == ["light0", "light1", "light2", "volta0", "volta1"]
    assert set(table["mechanism"]) == {"mig", "mps"}
    # the shared table: the page's ten columns in order, a GPU named "host / index"
    from dashboard.views.sharing import COLUMNS

    assert list(table.columns) == list(COLUMNS)
    assert all(" / " in gpu for gpu in table["gpu_of_host"])


def test_job_page_shows_the_finding_profile_evidence_chain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A finding that triggered an automatic profile shows the chain under it: the request, the
    trace, its findings and the what-if price (analyzers.autoprofile)."""
    from datetime import timedelta

    from analyzers.findings import Finding, Severity
    from analyzers.run.results import to_catalog
    from simulator.maker.series import T0, Fleet
    from warehouse.catalog import autoprofile as chain
    from warehouse.catalog import connect
    from warehouse.catalog.findings import upsert_findings

    publish(Fleet().gpus("stall-9", "h1", [0], 0, 30), tmp_path / "segments")
    engine = connect(f"sqlite:///{tmp_path / 'catalog.sqlite'}")
    p1 = Finding(
        "P1", Severity.WARN, "stall-9", "h1", ("0",), T0, T0 + timedelta(hours=1),
        "stall", "Raise DataLoader num_workers", 0.5, "share x hours", {"share": 0.4},
    )  # fmt: skip
    price = {
        "scenario": "dataloader_workers", "step_ms": 174.8, "estimated_step_ms": 128.1,
        "interval_ms": [120.2, 139.8], "saved_fraction": 0.27, "gpu_hours_saved_per_week": 45.0,
    }  # fmt: skip
    with engine.begin() as conn:
        upsert_findings(conn, [to_catalog(p1)], run_id="t")
        auto = chain.record_auto_profile(
            conn, request_id=3, job_id="stall-9", team=None, reason="triggered",
            gpu_seconds=30.0, finding_id=p1.finding_id, rule_id="P1",
        )  # fmt: skip
        evidence = {
            "trace_findings": [{"rule_id": "T8", "title": "data-loader bound: 40%",
                                "wasted_gpu_hours": 56.9}],
            "top_kernels": [], "stall_stack": None, "price": price,
        }  # fmt: skip
        chain.set_trace_evidence(conn, auto, "req3-h1-9", evidence)
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(tmp_path))
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    app.switch_page("views/job.py")
    app.query_params.update({"job_id": "stall-9"})
    app.run()
    assert not app.exception, app.exception
    texts = [m.value for m in app.expander[0].markdown]
    assert "**Profiled automatically (triggered): request 3** → trace `req3-h1-9`" in texts
    assert "- T8: data-loader bound: 40%" in texts
    assert any("174.8 → 128.1 ms (120.2-139.8), 45.0 GPU-h/week" in t for t in texts)
