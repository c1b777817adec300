"""Each page's headline numbers are the CLI's for the same window (issue 31): the Fleet page's
allocated and active GPU-hours are `fleetscope report weekly`'s for the week holding every sample,
the Job page's are `fleetscope job --json`'s, the Jobs page's recoverable GPU-hours per job are
`fleetscope opportunities --by job --json`'s, and the Sharing page's GPUs freed are
`fleetscope plan sharing --format json`'s (computed on open, and stored by the scheduled pass), the Hosts, GPUs and Traces pages' are `fleetscope hosts`,
`fleetscope gpus` and `fleetscope traces`'s. Real CLI entry point, real test warehouse."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analyzers.sharing.stored import read_stored
from app.cli import main
from dashboard import data, source
from tests.dashboard.conftest import Warehouse
from tests.dashboard.test_dashboard_pages import WEEK, _app, _metrics
from warehouse import catalog

ISO_WEEK = "2026-W47"  # conftest's START, 2026-11-16 08:00 UTC, and its two hours


def _number(text: str) -> float:
    found = re.search(r"[-\d,.]+", text)
    assert found, text
    return float(found.group(0).replace(",", ""))


def _cli_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict:  # type: ignore[type-arg]
    capsys.readouterr()
    assert main(argv) == 0
    return dict(json.loads(capsys.readouterr().out))


def test_fleet_headline_is_the_weekly_reports(
    warehouse_env: Warehouse, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet = _metrics(_app())
    argv = ["report", "weekly", "--week", ISO_WEEK, "--no-pdf", "--out", str(tmp_path)]
    assert main(argv) == 0
    markdown = (tmp_path / ISO_WEEK / "fleet.md").read_text()
    report = dict(re.findall(r"^- (GPU-hours [a-z]+): \*\*([\d.,]+)\*\*", markdown, re.M))
    # the page prints 3 significant digits, the report one decimal: equal within the report's
    # rounding (4.95 on the page is 4.9 or 5.0 there, depending on the float's last bits)
    for page, cli in (("Allocated", "GPU-hours allocated"), ("Active", "GPU-hours active")):
        assert abs(_number(fleet[page]) - _number(report[cli])) <= 0.05 + 1e-9, (page, report)
    assert _number(report["GPU-hours allocated"]) == 8.0


def test_job_headline_is_fleetscope_job(
    warehouse_env: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    page = _metrics(_app("views/job.py", job_id="stall-1"))
    cli = _cli_json(["job", "stall-1", "--json"], capsys)
    assert page["GPUs"] == str(len(cli["per_gpu"])) == "2"
    assert page["allocated GPU-h"] == f"{cli['allocated_gpu_hours']:.2f}" == "3.00"
    assert page["active"] == f"{100 * cli['active_frac']:.1f} %" == "45.0 %"
    assert page["SM activity"] == f"{100 * cli['sm_frac']:.1f} %"


def test_job_energy_money_and_mfu_are_fleetscope_jobs(
    warehouse_env: Warehouse, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a team's price set, the Job page's energy, cost and MFU tiles are the CLI's figures,
    read from one summary (the page used to read the job's energy a second time)."""
    monkeypatch.setenv("FLEETSCOPE_COST_CURRENCY", "USD")
    monkeypatch.setenv("FLEETSCOPE_COST_TEAM_GPU_HOUR_PRICES", "nlp=2.5")
    page = _metrics(_app("views/job.py", job_id="stall-1"))
    cli = _cli_json(["job", "stall-1", "--json"], capsys)
    assert page["Energy"] == f"{cli['energy_kwh']:,.2f} kWh" == "1.06 kWh"
    assert page["Idle-allocated energy"] == f"{cli['idle_energy_kwh']:,.2f} kWh"
    assert page["Cost"] == f"{cli['money']:,.2f} USD" == "7.50 USD"  # 3.00 GPU-h x 2.50
    assert cli["mfu"] is None  # no FLOPs from the SDK: the labelled proxy, as the CLI prints it
    assert page["MFU (proxy)"] == f"{100 * cli['tensor_frac']:.1f} %"


def test_jobs_recoverable_hours_are_fleetscope_opportunities_by_job(
    warehouse_env: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    app = _app("views/jobs.py")
    table = app.dataframe[0].value
    window = data.window_ending(source.connect_segments(warehouse_env.data_dir / "segments"), WEEK)
    assert window is not None  # the page's default window: the last 7 days
    length_s = (window.end - window.start).total_seconds()
    cli = _cli_json(
        ["opportunities", "--json", "--by", "job", "--window", f"{length_s}s",
         "--end", window.end.isoformat()],
        capsys,
    )  # fmt: skip
    from_cli = {x["key"]: x["gpu_hours"] for x in cli["top_jobs"]}
    shown = {
        str(job): float(hours)
        for job, hours in zip(table["job_id"], table["wasted_gpu_h"], strict=True)
        if float(hours) > 0
    }
    assert shown == pytest.approx(from_cli)
    assert shown  # the test warehouse's findings are there to compare


def test_sharing_headline_is_fleetscope_plan_sharing(
    warehouse_env: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    page = _metrics(_app("views/sharing.py"))
    window = data.window_ending(source.connect_segments(warehouse_env.data_dir / "segments"), WEEK)
    assert window is not None
    days = (window.end - window.start).total_seconds() / 86400
    cli = _cli_json(
        ["plan", "sharing", "--format", "json", "--days", f"{days}", "--end",
         window.end.isoformat()],
        capsys,
    )  # fmt: skip
    assert page["GPUs freed"] == str(cli["gpus_freed"])
    assert page["GPU-h/week freed"] == f"{cli['freed_gpu_hours_per_week']:.0f}"


def test_the_stored_sharing_plan_is_fleetscope_plan_sharing_of_its_window(
    planned_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page showing the scheduled pass's stored plan (tests/dashboard/
    test_sharing_stored_page.py) prints the CLI's numbers for the stored plan's window."""
    app = _app("views/sharing.py")
    assert "by the scheduled analyzer pass" in app.main.caption[0].value
    page = _metrics(app)
    plan = read_stored(catalog.connect(f"sqlite:///{planned_env / 'catalog.sqlite'}"), 7 * 86400.0)
    assert plan is not None
    days = (plan.window_end - plan.window_start).total_seconds() / 86400
    cli = _cli_json(
        ["plan", "sharing", "--format", "json", "--days", f"{days}", "--end",
         plan.window_end.isoformat()],
        capsys,
    )  # fmt: skip
    assert page["GPUs freed"] == str(cli["gpus_freed"]) == "3"
    assert page["GPU-h/week freed"] == f"{cli['freed_gpu_hours_per_week']:.0f}"
    assert page["Co-locations"] == str(len(cli["groups"]))


def _page_window_args() -> list[str]:
    """The pages' default window (the last 7 days to just after the newest sample) as the CLI's
    options: `--window 7d` without `--end` is the same window."""
    return ["--window", "7d", "--json"]


def test_hosts_headline_is_fleetscope_hosts(
    warehouse_env: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    app = _app("views/hosts.py")
    cli = _cli_json(["hosts", *_page_window_args()], capsys)
    assert _metrics(app) == {
        "hosts": str(cli["hosts"]),
        "hosts with XID errors": str(cli["hosts_with_xid"]),
        "new ECC double-bit errors": str(cli["new_ecc_dbe"]),
        "hosts throttling": str(cli["hosts_throttling"]),
    }
    assert (cli["hosts"], cli["hosts_with_xid"], cli["new_ecc_dbe"]) == (3, 1, 2)
    nodes = app.dataframe[0].value
    by_host = {row["host"]: row for row in cli["nodes"]}
    assert sorted(by_host) == nodes["host"].tolist() == ["e1", "e2", "w1"]
    for host, active in zip(nodes["host"], nodes["active_pct"], strict=True):
        assert by_host[host]["active_pct"] == pytest.approx(active)


def test_gpus_headline_is_fleetscope_gpus(
    warehouse_env: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    page = _app("views/gpus.py", host="e2")
    cli = _cli_json(["gpus", "--host", "e2", *_page_window_args()], capsys)
    assert _metrics(page) == {
        "GPUs": str(cli["gpus"]),
        "mean utilization": f"{cli['mean_util_pct']:.1f} %",
        "hottest": f"{cli['max_temp_c']:.0f} °C",
    }
    assert cli["gpus"] == 2 and cli["hosts"] == 1
    summary = page.dataframe[-1].value
    assert summary["gpu"].tolist() == [g["gpu"] for g in cli["gpu_rows"]]
    assert summary["util_pct"].tolist() == pytest.approx([g["util_pct"] for g in cli["gpu_rows"]])


def test_traces_headline_is_fleetscope_traces(
    warehouse_env: Warehouse, capsys: pytest.CaptureFixture[str]
) -> None:
    page = _app("views/traces.py")
    cli = _cli_json(["traces", "--json"], capsys)
    assert _metrics(page) == {
        "traces": str(cli["traces"]),
        "jobs profiled": str(cli["jobs"]),
        "with GPU kernels": str(cli["with_gpu_kernels"]),
        "analysed": str(cli["analysed"]),
    }
    assert cli["traces"] >= 1  # the test warehouse's trace of stall-1
    listed = page.dataframe[0].value
    assert listed["trace_id"].tolist() == [t["trace_id"] for t in cli["trace_rows"]]
    assert listed["top_finding"].tolist() == [t["top_finding"] for t in cli["trace_rows"]]
