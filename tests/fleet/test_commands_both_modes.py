"""Every command that reads telemetry answers the same in both modes (issue 30): the known fleet of
tests/dashboard/conftest.py written once as embedded segments with a SQLite catalog, and once
through a real fleet gateway into Iceberg tables on moto's S3 server with the catalog in
PostgreSQL; `fleetscope job`, `report weekly` and `plan sharing` run on each print the same.

Before, in fleet mode `job` called a 2-GPU job "a CPU-only process", `report weekly` showed
0.0 GPU-hours and `plan sharing` found 0 GPUs: they read the embedded views whatever the mode.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from dashboard.cli import settings_env
from fleetscope.settings import Settings, load_settings
from simulator.wire import TEST_TOKEN, post_batch
from tests.dashboard.conftest import build_warehouse, known_fleet, write_catalog
from tests.fleet.conftest import fleet_settings, pg_url, s3_endpoint  # noqa: F401 (fixtures)
from warehouse import catalog
from warehouse.fleet.gateway import Gateway

pytestmark = [pytest.mark.real_component("postgres")]

WEEK = "2026-W47"  # the known fleet's two hours, Monday 2026-11-16 08:00-10:00 UTC
COMMANDS = {
    "job": ["job", "stall-1"],
    "job-json": ["job", "train-ok", "--json"],
    "unknown job": ["job", "no-such-job"],
    "plan": [
        "plan", "sharing", "--end", "2026-11-16T10:00:00+00:00", "--days", "1", "--format", "json",
    ],
}  # fmt: skip


def _fleet_mode(settings: Settings) -> Settings:
    """The known fleet through one gateway's HTTP route (202 once committed to Iceberg), and its
    jobs and findings in the PostgreSQL catalog."""
    gateway = Gateway(settings)
    gateway.start()
    try:
        for name, rows in known_fleet().tables().items():
            assert post_batch(gateway.url, name, rows, token=TEST_TOKEN).status == 202
    finally:
        gateway.stop()
    engine = catalog.connect(settings.warehouse.catalog_url)
    write_catalog(engine, settings.path(settings.core.data_dir))
    engine.dispose()
    return settings


def _run(
    settings: Settings,
    argv: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> tuple[int, str]:
    for key, value in settings_env(settings).items():
        if key.startswith("FLEETSCOPE_"):
            monkeypatch.setenv(key, value)
    capsys.readouterr()
    code = main(argv)
    return code, capsys.readouterr().out


def _report(
    settings: Settings,
    out: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> str:
    argv = ["report", "weekly", "--week", WEEK, "--no-pdf", "--out", str(out)]
    code, _printed = _run(settings, argv, monkeypatch, capsys)
    assert code == 0
    (markdown,) = out.glob(f"{WEEK}/*.md")
    return markdown.read_text(encoding="utf-8")


def test_job_report_and_plan_print_the_same_in_both_modes(
    tmp_path: Path,
    fleet_settings: Settings,  # noqa: F811 (the fixture)
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    embedded = load_settings(env={}).with_overrides(core__data_dir=str(tmp_path / "embedded"))
    build_warehouse(tmp_path / "embedded")
    fleet = _fleet_mode(fleet_settings)
    monkeypatch.chdir(tmp_path)
    printed = {}
    for name, argv in COMMANDS.items():
        code_e, out_e = _run(embedded, argv, monkeypatch, capsys)
        code_f, out_f = _run(fleet, argv, monkeypatch, capsys)
        assert (code_f, out_f) == (code_e, out_e), name
        printed[name] = (code_f, out_f)
    assert printed["job"][0] == printed["job-json"][0] == printed["plan"][0] == 0
    assert "CPU-only" not in printed["job"][1]
    assert '"allocated_gpu_hours": 4.0' in printed["job-json"][1]  # 2 GPUs x 2 h
    assert printed["unknown job"][0] != 0  # said so, never an empty success
    assert '"gpus_considered": 0' not in printed["plan"][1]
    report_e = _report(embedded, tmp_path / "out-embedded", monkeypatch, capsys)
    report_f = _report(fleet, tmp_path / "out-fleet", monkeypatch, capsys)
    assert report_f == report_e
    assert "- GPU-hours allocated: **8.0**" in report_f
