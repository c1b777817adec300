"""The dashboard's inputs carrying quotes, HTML and SQL (issue 28's owed case), rendered with
Streamlit's AppTest on the test warehouse: each is shown as text or matched as a value, never
run as SQL or markup, and no page raises."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.dashboard.conftest import Warehouse

APP = str(Path(__file__).parents[2] / "dashboard" / "app.py")
# Quotes, SQL, HTML, a path and a LIKE wildcard in one value (each page render costs ~4-6 s on a
# busy machine, so the kinds share one value; the search also gets bare wildcards).
HOSTILE = ["stall-1' OR '1'='1\"; DROP TABLE jobs; --<script>alert(1)</script>../../x.sqlite%"]


def page(path: str, **query: str) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    app.switch_page(path)
    app.query_params.update(query)
    app.run()
    assert not app.exception, app.exception
    return app


@pytest.mark.parametrize("job_id", HOSTILE)
def test_a_hostile_job_id_is_an_unknown_job(warehouse_env: Warehouse, job_id: str) -> None:
    app = page("views/job.py", job_id=job_id)
    assert app.error[0].value.startswith(f"No GPU samples for job {job_id!r}")


@pytest.mark.parametrize("trace_id", HOSTILE)
def test_a_hostile_trace_id_shows_no_trace(warehouse_env: Warehouse, trace_id: str) -> None:
    app = page("views/trace.py", trace_id=trace_id)
    shown = [e.value for e in (*app.error, *app.warning, *app.info)]
    assert shown, "the page says the trace is unknown"


@pytest.mark.parametrize("search", [*HOSTILE, "%", "_"])
def test_a_hostile_search_filters_as_text(warehouse_env: Warehouse, search: str) -> None:
    app = page("views/jobs.py")
    app.text_input(key="job_search").input(search).run()
    assert not app.exception, app.exception
    assert app.dataframe[0].value["job_id"].tolist() == []  # matched as text: no job has it


@pytest.mark.parametrize("host", HOSTILE)
def test_a_hostile_host_filter_falls_back_to_a_known_host(
    warehouse_env: Warehouse, host: str
) -> None:
    app = page("views/gpus.py", host=host)
    assert app.multiselect(key="gpu_hosts").value == ["e1"]
