"""Weekly reports: numbers against the warehouse, rendering, PDF, and delivery to a real SMTP server."""

from __future__ import annotations

import email
import email.policy
import shutil
import socket
import subprocess
from email.message import EmailMessage
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import Envelope, Session

from analyzers.reports.build import Scope, build_weekly
from analyzers.reports.render import to_html, to_markdown
from analyzers.reports.week import IsoWeek
from app.cli import main
from fleetscope.errors import ConfigError
from tests.analyzers.reports.conftest import MONDAY, ReportWarehouse
from warehouse.catalog import connect
from warehouse.catalog.reports import list_report_runs
from warehouse.read.reader import open_segments

W46, W47 = IsoWeek(2026, 46), IsoWeek(2026, 47)


def test_iso_weeks() -> None:
    assert IsoWeek.parse("2026-W47") == W47
    assert W47.start == MONDAY and W47.end == MONDAY.replace(day=23)
    assert W47.shift(-1) == W46 and str(IsoWeek.parse("2027-W01").shift(-1)) == "2026-W53"
    assert IsoWeek.last_complete(MONDAY.replace(day=18, hour=9)) == W46
    for bad in ("2026-47", "2026-W54", "W47", ""):
        with pytest.raises(ConfigError):
            IsoWeek.parse(bad)


def _warehouse_hours(rw: ReportWarehouse, week: IsoWeek, team: str | None) -> tuple[float, float]:
    """Allocated and active GPU-hours straight from the samples (300 s each)."""
    con = open_segments(rw.data_dir / "segments")
    teams = {"a-w46": "vision", "a-w47": "vision", "b-w47": "nlp"}
    jobs = [j for j, t in teams.items() if team is None or t == team]
    rows = con.sql(
        f"""SELECT count(*) * 300 / 3600.0, sum(gr_engine_active) * 300 / 3600.0 FROM gpu_samples
            WHERE job_id IN ({", ".join(repr(j) for j in jobs)})
              AND ts >= to_timestamp({week.start.timestamp()})
              AND ts < to_timestamp({week.end.timestamp()})"""
    ).fetchall()
    return float(rows[0][0]), float(rows[0][1] or 0.0)


def _build(rw: ReportWarehouse, scope: Scope) -> object:
    return build_weekly(
        open_segments(rw.data_dir / "segments"), connect(rw.catalog_url), W47, scope,
        trend_weeks=3,
    )  # fmt: skip


def test_team_report_numbers_match_the_warehouse(report_warehouse: ReportWarehouse) -> None:
    report = _build(report_warehouse, Scope("team", "vision"))
    allocated, active = _warehouse_hours(report_warehouse, W47, "vision")
    assert (allocated, active) == pytest.approx((48.0, 38.4))
    assert [w.week for w in report.trend] == ["2026-W45", "2026-W46", "2026-W47"]
    assert report.this_week.allocated_h == pytest.approx(allocated)
    assert report.this_week.active_h == pytest.approx(active)
    assert report.this_week.efficiency_pct == pytest.approx(80.0)
    assert report.last_week.allocated_h == pytest.approx(
        _warehouse_hours(report_warehouse, W46, "vision")[0]
    )
    assert report.last_week.efficiency_pct == pytest.approx(30.0)
    assert report.trend[0].allocated_h == 0.0
    assert (report.wasted_gpu_h, report.previous_wasted_gpu_h) == (2.0, 20.0)
    assert [(f.rule_id, f.job_id) for f in report.findings] == [("P1", "a-w47")]
    assert [(j.job_id, j.allocated_h) for j in report.jobs] == [("a-w47", pytest.approx(48.0))]
    assert report.improved == [
        "GPU efficiency rose from 30.0 % to 80.0 %.",
        "18.0 fewer recoverable GPU-hours than last week.",
        "No more R2 findings (there were some last week).",
    ]


def test_admin_report_ranks_teams_and_counts_each_hour_once(
    report_warehouse: ReportWarehouse,
) -> None:
    report = _build(report_warehouse, Scope("admin"))
    allocated, active = _warehouse_hours(report_warehouse, W47, None)
    assert report.this_week.allocated_h == pytest.approx(allocated) == pytest.approx(60.0)
    assert report.this_week.active_h == pytest.approx(active)
    assert report.wasted_gpu_h == 14.0  # R1 and R3 name the same 12 hours of b-w47
    assert [(t.team, t.wasted_gpu_h) for t in report.teams] == [("nlp", 12.0), ("vision", 2.0)]
    assert report.teams[0].allocated_h == pytest.approx(12.0)
    assert report.teams[0].efficiency_pct == 0.0
    assert [j.job_id for j in report.jobs] == ["b-w47", "a-w47"]  # idlest first


def test_user_report_and_an_unknown_scope(report_warehouse: ReportWarehouse) -> None:
    assert _build(report_warehouse, Scope("user", "bob")).this_week.allocated_h == pytest.approx(
        12.0
    )
    nobody = _build(report_warehouse, Scope("team", "nobody"))
    assert nobody.this_week.allocated_h == 0.0 and nobody.findings == [] and nobody.jobs == []
    with pytest.raises(ConfigError):
        Scope("group", "x")  # type: ignore[arg-type]


def test_html_is_self_contained_and_markdown_says_the_same(
    report_warehouse: ReportWarehouse,
) -> None:
    report = _build(report_warehouse, Scope("admin"))
    html = to_html(report)
    assert "<svg" in html and "<script" not in html and "src=" not in html and "<link" not in html
    for shown in ("60.0", "14.0", "fix for R3", "nlp", "2026-W46"):
        assert shown in html
    markdown = to_markdown(report)
    assert "- GPU-hours allocated: **60.0**" in markdown
    assert "| nlp | 12.0 | 0.0 % | 12.0 |" in markdown


class _Inbox:
    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []

    async def handle_DATA(self, server: object, session: Session, envelope: Envelope) -> str:
        raw = envelope.original_content or b""
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        self.messages.append(parsed)
        return "250 Message accepted for delivery"


@pytest.mark.slow
@pytest.mark.real_component("chromium")
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed")
def test_cli_writes_pdf_and_mails_once(
    report_warehouse: ReportWarehouse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inbox = _Inbox()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    smtp = Controller(inbox, hostname="127.0.0.1", port=port)
    smtp.start()
    try:
        for name, value in {
            **report_warehouse.env,
            "FLEETSCOPE_REPORTS_SMTP_HOST": "127.0.0.1",
            "FLEETSCOPE_REPORTS_SMTP_PORT": str(port),
            "FLEETSCOPE_REPORTS_EMAIL_DOMAIN": "example.org",
        }.items():
            monkeypatch.setenv(name, value)
        argv = [
            "report",
            "weekly",
            "--team",
            "vision",
            "--week",
            "2026-W47",
            "--out",
            str(tmp_path),
            "--send",
        ]
        assert main(argv) == 0
        assert main(argv) == 0  # a re-run rewrites the files but does not mail again
    finally:
        smtp.stop()
    assert len(inbox.messages) == 1
    message = inbox.messages[0]
    assert message["To"] == "alice@example.org"
    assert message["Subject"] == "[fleetscope] GPU efficiency, team vision, week 2026-W47"
    html = message.get_body(preferencelist=("html",))
    assert html is not None and "80.0 %" in html.get_content()
    attachments = list(message.iter_attachments())
    assert [a.get_filename() for a in attachments] == ["team-vision.pdf"]
    assert attachments[0].get_content()[:5] == b"%PDF-"
    with connect(report_warehouse.catalog_url).begin() as conn:
        runs = list_report_runs(conn, "weekly")
    assert [(r.scope, r.week, r.recipients) for r in runs] == [
        ("team-vision", "2026-W47", "alice@example.org")
    ]
    pdf = tmp_path / "2026-W47" / "team-vision.pdf"
    subprocess.run(["pdftoppm", "-png", "-r", "60", "-f", "1", "-l", "1", str(pdf), str(tmp_path / "page")], check=True)  # fmt: skip
    page = next(tmp_path.glob("page*.png"))
    assert page.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_weeks_energy_per_team_and_money_only_where_prices_are_set(
    report_warehouse: ReportWarehouse,
) -> None:
    """W47: a-w47 draws 70 + 630 x 0.8 = 574 W on 2 GPUs for 24 h, b-w47 70 W idle on 1 GPU for
    12 h (the maker's power; no energy counter, so integrated from power)."""
    from analyzers.accounting.cost import Prices
    from analyzers.reports.render import to_markdown

    unpriced = _build(report_warehouse, Scope("admin")).energy  # type: ignore[attr-defined]
    vision, nlp = 2 * 24 * 0.574, 12 * 0.070
    assert [(t.team, t.kwh, t.idle_kwh) for t in unpriced.teams] == [
        ("vision", pytest.approx(vision), 0.0),
        ("nlp", pytest.approx(nlp), pytest.approx(nlp)),
    ]
    assert unpriced.total.kwh == pytest.approx(vision + nlp)
    assert (unpriced.currency, unpriced.total.money, unpriced.total.co2e_kg) == ("", None, None)

    prices = Prices("EUR", by_team={"nlp": 2.0}, grid_gco2e_per_kwh=300.0, note="example prices")
    report = build_weekly(
        open_segments(report_warehouse.data_dir / "segments"), connect(report_warehouse.catalog_url),
        W47, Scope("admin"), trend_weeks=1, prices=prices,
    )  # fmt: skip
    priced = report.energy
    assert priced is not None
    assert [(t.team, t.money) for t in priced.teams] == [("vision", None), ("nlp", 24.0)]
    assert priced.total.money == 24.0  # 12 nlp GPU-hours at 2 EUR; vision has no price
    assert priced.total.co2e_kg == pytest.approx((vision + nlp) * 0.3)
    text = to_markdown(report)
    assert "| team | allocated GPU-h | kWh | idle-allocated kWh | kg CO2e | cost (EUR) |" in text
    assert "| nlp | 12.0 | 0.8 | 0.8 | 0.3 | 24.00 |" in text
    assert "| vision | 48.0 | 27.6 | 0.0 | 8.3 | n/a |" in text
    assert "example prices" in text
    # the catalog's findings were written without energy: GPU-hours only, and no money
    assert "Recoverable (open findings): 14.0 GPU-h, 0.0 kWh." in text
    assert "cost (" not in to_markdown(_build(report_warehouse, Scope("admin")))  # type: ignore[arg-type]


def test_the_weeks_measured_mfu_per_job_with_its_kwh_and_money(
    report_warehouse: ReportWarehouse,
) -> None:
    """a-w47 is the week's only job whose SDK reported FLOPs: 35 % MFU, its team's median."""
    from analyzers.accounting.cost import Prices

    report = build_weekly(
        open_segments(report_warehouse.data_dir / "segments"), connect(report_warehouse.catalog_url),
        W47, Scope("admin"), trend_weeks=1, prices=Prices("EUR", by_team={"vision": 1.5}),
    )  # fmt: skip
    section = report.mfu
    assert section is not None and section.measured_jobs == 1
    (line,) = section.jobs
    assert (line.job_id, line.team, line.dtype) == ("a-w47", "vision", "bf16")
    assert (line.mfu, line.team_median) == (pytest.approx(0.35), pytest.approx(0.35))
    assert line.kwh == pytest.approx(2 * 24 * 0.574)
    assert line.money == pytest.approx(48 * 1.5)
    text = to_markdown(report)
    assert "| job | team | GPU (dtype) | MFU (measured) | team median | kWh | cost (EUR) |" in text
    assert (
        "| a-w47 | vision | NVIDIA H100 80GB HBM3 (bf16) | 35.0 % | 35.0 % | 27.55 | 72.00 |"
        in text
    )
    assert "Model FLOPs utilization (measured)" in to_html(report)
    assert _build(report_warehouse, Scope("team", "nlp")).mfu is None  # type: ignore[attr-defined]
