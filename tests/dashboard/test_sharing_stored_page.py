"""The Sharing page shows the plan the scheduled analyzer pass stored for its window without
computing one, says whose window and when it was computed, and computes (saying so) when the
stored plan is of another window (issue 31). Real published segments and catalog, real Streamlit
(AppTest); the known fleet of tests/analyzers/test_sharing.py (3 GPUs freed)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from analyzers.sharing import stored, usage
from analyzers.sharing.stored import KIND, read_stored
from tests.dashboard.conftest import planned
from tests.dashboard.test_dashboard_pages import _app, _metrics
from warehouse import catalog
from warehouse.catalog.plans import record_plan

WEEK_S = 7 * 86400.0


def _never(*_: Any, **__: Any) -> Any:
    raise AssertionError("the page computed a plan")


def test_the_page_shows_the_stored_plan_without_computing_one(
    planned_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stored, "plan_document", _never)
    monkeypatch.setattr(usage, "gpu_uses", _never)
    app = _app("views/sharing.py")  # _app asserts the page raised nothing
    assert _metrics(app) == {"GPUs freed": "3", "GPU-h/week freed": "72", "Co-locations": "2"}
    caption = app.main.caption[0].value
    assert caption.startswith("Plan of 2025-02-24 23:00 – 2025-03-03 23:59 UTC, computed at ")
    assert caption.endswith(" UTC by the scheduled analyzer pass.")
    assert app.dataframe[0].value["job_id"].tolist()[:3] == ["light0", "light1", "light2"]
    # each mechanism's constraints once, naming its groups (the week has 91 groups of one kind)
    assert [e.label for e in app.main.expander] == [
        "mig: constraints (group 1)",
        "mps: constraints (group 2)",
    ]
    assert "MIG mode" in app.main.expander[0].markdown[0].value


def test_a_stored_plan_of_another_window_is_not_shown_as_this_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data_dir = planned(tmp_path / "var", store=False)
    engine = catalog.connect(f"sqlite:///{data_dir / 'catalog.sqlite'}")
    end = datetime.fromisoformat("2025-03-03T20:00:00+00:00")  # 4 h before the newest sample
    with engine.begin() as conn:
        record_plan(conn, KIND, WEEK_S, end - timedelta(days=7), end, {"gpus_freed": 42})
    engine.dispose()
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(data_dir))
    app = _app("views/sharing.py")
    assert _metrics(app)["GPUs freed"] == "3"  # computed for the page's window, not the 42
    caption = app.main.caption[0].value
    assert caption.startswith("Plan of 2025-02-24 23:00 – 2025-03-03 23:59 UTC, computed on this")
    assert "stores the last 7 days' plan every 1 h, none of this window" in caption


def test_a_catalog_without_the_table_computes_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlalchemy

    data_dir = planned(tmp_path / "var", store=False)
    engine = sqlalchemy.create_engine(f"sqlite:///{data_dir / 'catalog.sqlite'}")
    with engine.begin() as conn:  # a catalog an older build made, not opened by a newer server
        conn.execute(sqlalchemy.text("DROP TABLE stored_plans"))
    assert read_stored(engine, WEEK_S) is None
    engine.dispose()
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(data_dir))
    app = _app("views/sharing.py")
    assert _metrics(app)["GPUs freed"] == "3"
    assert "computed on this open" in app.main.caption[0].value
