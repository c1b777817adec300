"""Every page rendered with Streamlit's AppTest on the test warehouse, checking the numbers shown."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from analyzers.plain import UNPRICED, PlainFinding
from app.cli import main
from dashboard import data, findings_view, headline_tiles, source, tables
from dashboard.views import fleet
from fleetscope.settings import load_settings
from tests.dashboard.conftest import DATA, START, Warehouse, build_warehouse
from warehouse.catalog import connect
from warehouse.catalog.findings import Finding, upsert_findings
from warehouse.catalog.profiling import list_profile_requests

APP = str(Path(__file__).parents[2] / "dashboard" / "app.py")
WEEK = timedelta(days=7)


def _app(page: str | None = None, **query: str) -> AppTest:
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    if page is not None:
        app.switch_page(page)
        app.query_params.update(query)
        app.run()
    assert not app.exception, app.exception
    return app


def _finding_rules(app: AppTest) -> list[str]:
    """Rule ids of the findings shown, from their plain-language headings (`**T1 · Idle time**`)."""
    return [
        m.value.removeprefix("**").split(" · ")[0]
        for m in app.markdown
        if m.value.startswith("**") and " · " in m.value and _RECOVERABLE.search(m.value)
    ]


_RECOVERABLE = re.compile(r"GPU-h(/week)?\*\* recoverable|GPU-hours not estimated")


def _metrics(app: AppTest) -> dict[str, str]:
    """label -> value of every headline tile on the page (dashboard.headline_tiles)."""
    return headline_tiles.read(m.value for m in app.markdown)


def test_fleet_page_shows_the_warehouse_numbers(warehouse_env: Warehouse) -> None:
    app = _app()
    assert app.title[0].value == "Fleet"
    assert _metrics(app) == {
        "Allocated": "8.00 GPU-h",
        "Active": "4.95 GPU-h",
        "SM-active": "3.70 GPU-h",
        "Idle while allocated": "3.05 GPU-h",
        "Capacity seen": "12.0 GPU-h",
    }
    assert "6 GPUs · 3 jobs" in app.caption[0].value
    idlest = app.dataframe[-1].value
    assert idlest["job_id"].tolist() == ["stall-1", "idle-1", "train-ok"]
    assert idlest["user"].tolist() == ["carol", "bob", "alice"]
    opportunities = app.table[1].value  # short read-only tables are plain HTML (tables.static)
    assert opportunities[["rule", "recoverable GPU-h"]].values.tolist() == [
        ["P1", 1.2],
        ["R3", 1.0],
    ]


def test_fleet_top_findings_are_text_with_their_evidence_and_a_link_to_the_job(
    warehouse_env: Warehouse,
) -> None:
    """Issue 31 (first paint): each top finding is one Markdown block (problem, fix, evidence as
    a Markdown table) and a link to its job, where the raw JSON is; no `st.table` or `st.json`
    per finding on the fleet page."""
    app = _app()
    assert _finding_rules(app) == ["P1", "R3"]
    stall = next(m.value for m in app.markdown if m.value.startswith("**P1"))
    assert "**Problem:** stall-1 waits on its DataLoader 40 % of each step" in stall
    assert "**Fix:** Raise DataLoader num\\_workers and pin memory." in stall
    assert stall.endswith("| evidence | value |\n|---|---|\n| data wait | 40 % |")
    assert [link.proto.label for link in app.get("page_link")] == [
        "job stall-1: raw evidence and what followed",
        "job idle-1: raw evidence and what followed",
    ]
    assert len(app.table) == 3  # the percentiles and the two opportunity tables, nothing more
    assert not app.json


def test_a_finding_nobody_priced_says_so_instead_of_zero_gpu_hours() -> None:
    unpriced = PlainFinding(
        rule_id="R15", rule="Fragmentation", severity="info", problem="p", fix="f",
        gpu_hours=0.0, job_id=None, host=None, gpus=(), when="",
        estimate="not estimated: the cost is communication time samples cannot isolate",
    )  # fmt: skip
    assert findings_view.brief_markdown(unpriced).splitlines() == [
        "**R15 · Fragmentation** · info · recoverable GPU-hours not estimated",
        "",
        "**Problem:** p  ",
        "**Fix:** f  ",
        ":gray[estimate\\: not estimated\\: the cost is communication time samples cannot isolate]",
    ]


def test_fleet_page_opens_with_its_headline_chart_and_one_breakdown(
    warehouse_env: Warehouse,
) -> None:
    """Issue 31 (first paint): the breakdowns are lazy tabs, only the open one is computed."""
    app = _app()
    assert [t.label for t in app.tabs] == list(fleet.BREAKDOWNS)
    assert len(app.get("vega_lite_chart")) == 2  # GPU-hours, and utilization by cluster
    app.session_state["fleet_breakdown"] = fleet.BREAKDOWNS[2]
    app.run()
    assert not app.exception, app.exception
    assert len(app.get("vega_lite_chart")) == 2  # GPU-hours, and the heatmap
    assert "grey: no job held any GPU of the host" in " ".join(c.value for c in app.caption)


def test_opportunities_are_the_rows_of_fleetscope_opportunities(
    warehouse_env: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    app = _app()
    by_rule, by_team = app.table[1].value, app.table[2].value
    window = data.window_ending(source.connect_segments(warehouse_env.data_dir / "segments"), WEEK)
    assert window is not None  # the page's default window: the last 7 days
    length_s = (window.end - window.start).total_seconds()
    argv = ["opportunities", "--json", "--window", f"{length_s}s", "--end", window.end.isoformat()]
    assert main(argv) == 0
    cli = json.loads(capsys.readouterr().out)

    def rows(lines: list[dict[str, Any]]) -> list[list[Any]]:
        return [[x["key"], x["gpu_hours"], x["findings"], len(x["jobs"])] for x in lines]

    assert rows(cli["by_rule"]) == [["P1", 1.2, 1, 1], ["R3", 1.0, 1, 1]]
    shown = ["recoverable GPU-h", "findings", "jobs"]  # the headers of fleet.TREND and its table
    assert by_rule[["rule", *shown]].values.tolist() == rows(cli["by_rule"])
    assert by_team[["team", *shown]].values.tolist() == rows(cli["by_group"])


def test_rules_without_recoverable_hours_are_named_below_the_ranking_not_ranked_at_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Memory creep (R13) estimates no GPU-hours: a risk, not idle time. Ranked among the
    others it read "0.00 recoverable GPU-h" beside 183 findings on the week; the page and
    `fleetscope opportunities` both name it below the ranked rules instead."""
    built = build_warehouse(tmp_path)
    for name, value in built.env.items():
        monkeypatch.setenv(name, value)
    engine = connect(f"sqlite:///{built.data_dir / 'catalog.sqlite'}")
    with engine.begin() as conn:
        upsert_findings(
            conn,
            [
                Finding("f-creep", "R13", "warn", START, START + timedelta(hours=1), 0.0,
                        job_id="train-ok", team="vision", recommendation="Free cached tensors."),
            ],
            run_id="test",
        )  # fmt: skip
    engine.dispose()
    app = _app()
    assert app.table[1].value["rule"].tolist() == ["P1", "R3"]
    captions = " ".join(c.value for c in app.caption)
    assert (
        "Flagged, with no GPU-hours to recover (a risk, not idle time): "
        "R13 GPU memory creeping (1 finding, 1 job)"
    ) in captions
    window = data.window_ending(source.connect_segments(built.data_dir / "segments"), WEEK)
    assert window is not None
    length_s = (window.end - window.start).total_seconds()
    assert main(["opportunities", "--window", f"{length_s}s", "--end", window.end.isoformat()]) == 0
    printed = capsys.readouterr().out
    assert "flagged, no GPU-hours to recover: R13 (1 finding, 1 job)" in printed
    assert not re.search(r"^R13 ", printed, re.MULTILINE)  # not a 0.0 row of the ranked table


def test_fleet_page_on_an_empty_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETSCOPE_CORE_DATA_DIR", str(tmp_path))
    app = _app()
    assert "no GPU samples yet" in app.info[0].value


def test_jobs_page_searches(warehouse_env: Warehouse) -> None:
    app = _app("views/jobs.py")
    table = app.dataframe[0].value
    assert table["job_id"].tolist() == ["stall-1", "idle-1", "train-ok"]
    # the headline above the table: its sums (the fleet page's allocated and idle GPU-hours)
    assert _metrics(app) == {
        "jobs": "3",
        "allocated GPU-h": "8.00",
        "idle GPU-h": "3.05",
        "jobs with findings": "2",
    }
    assert table.set_index("job_id").loc["stall-1", "findings"] == 1
    assert table.set_index("job_id").loc["stall-1", "wasted_gpu_h"] == 1.2
    app.text_input(key="job_search").input("nlp").run()
    assert app.dataframe[0].value["job_id"].tolist() == ["stall-1", "idle-1"]


def test_a_listing_is_as_wide_as_the_longest_id_on_its_page(warehouse_env: Warehouse) -> None:
    """The grid sizes a column from the first rows it measures: the week's 11th job id was cut.
    The id a row opens is sized to its longest value on the shown page instead."""
    app = _app("views/jobs.py")
    columns = json.loads(app.dataframe[0].proto.columns)
    assert columns["job_id"]["width"] == tables.text_px(pd.Series(["train-ok"])) == 70
    assert "width" not in columns["user"]  # the other columns as the grid sizes them
    assert tables.text_px(pd.Series(["team-research/llama3-70b-distill-memv", "1"])) == 259
    assert tables.text_px(pd.Series(["x" * 200])) == tables.TEXT_MAX_PX


def test_job_page_shows_measured_mfu_where_the_sdk_sent_flops(warehouse_env: Warehouse) -> None:
    app = _app("views/job.py", job_id="train-ok")
    shown = _metrics(app)
    assert shown["MFU (measured)"] == "45.0 %"  # never the proxy's 40 % beside it
    assert "MFU (proxy)" not in shown
    fleet = _app()
    fleet.session_state["fleet_breakdown"] = "MFU by team"  # a lazy tab: computed once opened
    fleet.run()
    headings = [h.value for h in fleet.subheader]
    assert "MFU by team (measured: the SDK's FLOPs per step)" in headings
    assert "MFU proxy by team (DCGM tensor-pipe activity, the other jobs)" in headings


def test_job_page_shows_series_steps_findings_and_traces(warehouse_env: Warehouse) -> None:
    app = _app("views/job.py", job_id="stall-1")
    assert app.title[0].value == "Job stall-1"
    assert _metrics(app) == {
        "GPUs": "2",
        "allocated GPU-h": "3.00",
        "active": "45.0 %",
        "SM activity": "30.0 %",
        "mean step time": "20.000 s",
        "data wait of step": "40.0 %",
        # issue 32: 2 GPUs x 1.5 h at the maker's 70 + 630 x 0.45 W, integrated from power (no
        # energy counter); no price set; the tensor-pipe activity as the labelled MFU proxy
        "Energy": "1.06 kWh",
        "Idle-allocated energy": "0.00 kWh",
        "Cost": "n/a",
        "MFU (proxy)": "10.0 %",
    }
    assert "user: carol" in app.caption[0].value
    # issue 15: the finding in plain language (as `fleetscope job`), raw JSON only in an expander
    markdown = [m.value for m in app.markdown]
    assert "**P1 · Data-loader stall** · warn · **1.2 GPU-h** recoverable" in markdown
    assert any(m.startswith("**Problem:** ") and "**Fix:** Raise DataLoader num_workers" in m
               for m in markdown)  # fmt: skip
    assert [e.label for e in app.main.expander] == ["raw evidence (JSON)"]  # glossary: sidebar
    about = app.table[0].value
    assert about.loc["hosts", "value"] == "e2, w1" and about.loc["GPUs", "value"] == "2"
    assert about.loc["state", "value"] == "running"  # no end in the catalog, samples fresh
    charts = app.get("vega_lite_chart")
    assert len(charts) == 7  # 5 GPU series + step time + data wait


def test_job_page_requests_a_profile(warehouse_env: Warehouse) -> None:
    app = _app("views/job.py", job_id="train-ok")
    app.button(key="request_profile").click().run()
    assert "Profile requested" in app.success[0].value
    engine = connect(load_settings(env=warehouse_env.env).core.data_dir and
                     f"sqlite:///{warehouse_env.data_dir / 'catalog.sqlite'}")  # fmt: skip
    with engine.begin() as conn:
        requests = list_profile_requests(conn)
    engine.dispose()
    assert [(r.job_id, r.state, r.steps) for r in requests][-1] == ("train-ok", "pending", 20)


def test_job_page_for_an_unknown_job(warehouse_env: Warehouse) -> None:
    app = _app("views/job.py", job_id="nope")
    assert "No GPU samples for job 'nope'" in app.error[0].value


STEPS_SEEN = [1, 2]  # the ProfilerStep ranges of the trace


def test_traces_and_trace_pages(warehouse_env: Warehouse) -> None:
    app = _app("views/traces.py")
    assert app.dataframe[0].value["trace_id"].tolist() == ["stall-1/mi250"]
    app = _app("views/trace.py", trace_id="stall-1/mi250")
    # `analyze_trace`'s definitions (exact timestamps): kernel_time 8911.9 us, idle 98.33 %,
    # compute 1.24 % (HTA's ns rounding gives 98.53 % and 1.08 %: below).
    assert _metrics(app) == {
        "rank 0: steps": "2",  # issue 15: what `fleetscope profile` prints per rank
        "mean step": "4.7 ms",
        "data loader of step time": "0 %",
        "GPU busy span": "8.9 ms",
        "idle": "98.3 %",
        "compute": "1.2 %",
        "GPU ops": "16",
    }
    steps = app.dataframe[0].value  # per step: time, GPU busy share, data loader
    assert steps["step"].tolist() == STEPS_SEEN
    # as `fleetscope trace analyze` prints them: 9288 us and 49.07 us, no data-loader time
    assert steps["duration_ms"].tolist() == pytest.approx([9.288, 0.04907], rel=1e-3)
    assert steps["dataloader_pct"].tolist() == [0.0, 0.0]
    stalls = app.dataframe[2].value  # idle time per stream, by cause
    assert stalls["stream"].tolist() == [0]
    assert stalls["host_wait_ms"].tolist() == pytest.approx([8.762845])
    top = app.dataframe[3].value
    assert top["calls"].sum() == 16
    assert top["name"].iloc[0] == "Memcpy HtoD (Host -> Device)"
    assert _finding_rules(app) == ["T1", "T2", "T5", "T10"]
    # a trace's findings are weekly what-if rates, not GPU-hours of a window (stored findings);
    # a rule that prices nothing says so rather than "0 GPU-h/week recoverable"
    headings = [m.value for m in app.markdown if _RECOVERABLE.search(m.value)]
    assert [h.rsplit(" · ", 1)[1] for h in headings] == [UNPRICED] * 3 + [
        "**0 GPU-h/week** recoverable"  # T10: the replay's AMP saving waits on the CPU side
    ], headings
    # the replay's model is read under its estimates, not at the foot of the page
    shown = [(e.type, str(e.value)) for e in _in_order(app.main) if e.type in _TEXTS]
    at = shown.index(("subheader", "What if"))
    assert shown[at + 1][1].startswith("model: CPU events keep their order"), shown[at : at + 2]
    assert shown[-1][1].startswith("rank 0: no CUPTI counters"), shown[-1]  # Every analysis's


_TEXTS = ("subheader", "caption")


def _in_order(node: Any) -> Iterator[Any]:
    """Every element under `node`, in the order the page draws them."""
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _in_order(child)


def test_trace_page_agrees_with_hta_on_request(warehouse_env: Warehouse) -> None:
    """HTA 0.5.0's `get_temporal_breakdown()` on this trace, as the data folder keeps it."""
    app = _app("views/trace.py", trace_id="stall-1/mi250")
    app.toggle(key="hta_compatible").set_value(True).run()
    assert not app.exception, app.exception
    hta = pd.read_csv(DATA / "mi250_minitoy_hta-0.5.0_temporal_breakdown.csv").iloc[0]
    assert _metrics(app) == {
        "rank 0: steps": "1",  # HTA's load rules drop the trace's last step
        "mean step": "9.3 ms",
        "data loader of step time": "0 %",
        "GPU busy span": f"{hta['kernel_time(us)'] / 1000:,.1f} ms",
        "idle": f"{hta['idle_time_pctg']:.1f} %",
        "compute": f"{hta['compute_time_pctg']:.1f} %",
        "GPU ops": "16",
    }
    assert _finding_rules(app) == ["T1", "T5", "T10"]


def test_hosts_page_flags_the_faulty_host(warehouse_env: Warehouse) -> None:
    app = _app("views/hosts.py")
    assert _metrics(app) == {
        "hosts": "3",
        "hosts with XID errors": "1",
        "new ECC double-bit errors": "2",
        "hosts throttling": "0",
    }
    nodes = app.dataframe[0].value  # issue 31: the node list ClusterCockpit shows
    assert nodes["host"].tolist() == ["e1", "e2", "w1"]
    assert nodes["gpus"].tolist() == [2, 2, 2]
    assert nodes["allocated_gpus"].tolist() == [2, 1, 1]  # in the newest bucket
    assert nodes["jobs_now"].tolist() == [1, 1, 1]
    assert nodes["active_pct"].round(3).tolist() == [90.0, 16.875, 16.875]
    assert nodes["cpu_busy_pct"].tolist() == [20.0, 20.0, 20.0]
    assert nodes["load1"].tolist() == ["-", "-", "-"]  # the test host rows carry no load: "-"
    flagged = app.dataframe[1].value
    assert flagged["host"].tolist() == ["w1"]
    assert flagged["xid_code"].tolist() == [79]


@pytest.mark.parametrize(
    ("hours", "shown"),
    [
        (3.05, "3.05 GPU-h"),
        (9.999, "10.0 GPU-h"),
        (12.0, "12.0 GPU-h"),
        (123.4, "123 GPU-h"),
        (9999.4, "9,999 GPU-h"),
        (12345.0, "12.3k GPU-h"),
        (168000.0, "168k GPU-h"),
        (2.5e6, "2.50M GPU-h"),
    ],
)
def test_headline_gpu_hours_keep_three_significant_digits_so_they_fit_their_column(
    hours: float, shown: str
) -> None:
    from dashboard.views.fleet import _fmt_h

    assert _fmt_h(hours) == shown
