"""The Sharing page shows `fleetscope plan sharing`'s plan for the window (issue 18)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.analyzers.fleet_builder import publish
from tests.analyzers.test_sharing import _known_fleet

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
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["GPUs freed"] == "3"
    assert metrics["Co-locations"] == "2"
    table = app.dataframe[0].value
    assert sorted(table["job_id"]) == ["light0", "light1", "light2", "volta0", "volta1"]
    assert set(table["mechanism"]) == {"mig", "mps"}
