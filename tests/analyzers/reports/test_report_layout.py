"""A report worth mailing (issue 31): findings ranked by recoverable GPU-hours with everything
under 0.1 GPU-h in an appendix, chart axes whose labels are distinct and whose bars agree with
them, and the words allocated / active / recoverable (never "used" or "wasted")."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analyzers.reports.build import FindingLine, Scope, WeeklyReport, WeekUsage
from analyzers.reports.render import to_html, to_markdown
from analyzers.reports.svg import grouped_bars, nice_ticks
from analyzers.reports.week import IsoWeek


def _finding(rule_id: str, job_id: str, hours: float) -> FindingLine:
    return FindingLine(
        rule_id=rule_id, severity="warn", job_id=job_id, user=None, team=None,
        wasted_gpu_h=hours, recommendation="fix it", estimate_method="stated", evidence={},
    )  # fmt: skip


def _report(findings: list[FindingLine]) -> WeeklyReport:
    return WeeklyReport(
        scope=Scope("admin"),
        week=IsoWeek.parse("2026-W47"),
        trend=[WeekUsage("2026-W46", 0.0, 0.0, 0.0), WeekUsage("2026-W47", 8.0, 4.9, 8.0)],
        findings=findings,
        wasted_gpu_h=sum(f.wasted_gpu_h for f in findings),
        previous_wasted_gpu_h=0.0,
        jobs=[],
    )


def test_findings_under_a_tenth_of_a_gpu_hour_go_to_the_appendix() -> None:
    report = _report([
        _finding("R3", "idle-1", 0.04), _finding("P1", "stall-1", 1.2),
        _finding("R1", "zero-1", 3.5), _finding("P2", "noisy-1", 0.0),
    ])  # fmt: skip
    html = to_html(report)
    main, appendix = html.split("Appendix: findings under 0.1 GPU-h")
    cards = re.findall(r"<h3><span class='sev-warn'>(\w+) ", main)
    assert cards == ["R1", "P1"]  # largest first, nothing under 0.1 GPU-h among the cards
    assert re.findall(r"<td>(\w+) [A-Z][^<]*</td><td>([\w-]+)</td>", appendix) == [
        ("R3", "idle-1"), ("P2", "noisy-1"),
    ]  # fmt: skip
    markdown = to_markdown(report)
    assert markdown.index("**R1 ") < markdown.index("**P1 ") < markdown.index("Appendix")
    assert "- R3 Idle allocation on idle-1: 0.040 GPU-h" in markdown
    for text in (html, markdown):
        assert not re.search(r"\b(used|wasted) GPU-h", text, re.I)


def test_an_appendix_finding_never_reads_as_at_the_cut() -> None:
    """0.0999 GPU-h is under 0.1: rounded to two decimals it would read 0.10 in a list titled
    "under 0.1 GPU-h" (the demo's R1 did); the appendix rounds down, to three decimals."""
    report = _report([_finding("R1", "zero-1", 0.0999), _finding("P1", "stall-1", 1.2)])
    assert "<td class='n'>0.099</td>" in to_html(report)
    assert "- R1 Zero utilization on zero-1: 0.099 GPU-h" in to_markdown(report)


def test_an_appendix_finding_nobody_priced_says_so() -> None:
    """R15 puts no number on its waste: its 0 GPU-h is unknown, not nothing to recover."""
    fragmented = replace(
        _finding("R15", "spread-1", 0.0),
        estimate_method="not estimated: the cost is communication time samples cannot isolate",
    )
    report = _report([fragmented, _finding("P1", "stall-1", 1.2)])
    assert "<td class='n'>not estimated</td>" in to_html(report)
    assert "on spread-1: recoverable GPU-hours not estimated\n" in to_markdown(report)


def test_recoverable_money_carries_the_findings_currency() -> None:
    """Money the findings priced (their evidence's currency) when the report itself has no
    price set: "0.82 USD", never a bare "0.82"; without any currency, no money at all."""
    from analyzers.reports.energy import EnergyLine, EnergySection

    section = EnergySection(total=EnergyLine("total", 1.3, 0.4, 0.1, None))
    section.recoverable_gpu_h, section.recoverable_kwh, section.recoverable_money = 0.3, 0.1, 0.82
    assert section.recoverable == "Recoverable (open findings): 0.3 GPU-h, 0.1 kWh."
    section.recoverable_currency = "USD"
    assert section.recoverable == "Recoverable (open findings): 0.3 GPU-h, 0.1 kWh, 0.82 USD."


def test_the_summary_page_ends_before_the_findings() -> None:
    html = to_html(_report([_finding("P1", "stall-1", 1.2)]))
    assert "<div class='findings'><h2>Findings, by recoverable GPU-hours</h2>" in html
    assert ".findings { page-break-before: always;" in html
    # the trend table lists the weeks with data; the chart shows every week of the trend
    assert "<td>2026-W46</td>" not in html and "<td>2026-W47</td>" in html


@pytest.mark.parametrize(
    ("peak", "ticks"),
    [
        (3.0, [0, 1, 2, 3]),
        (2.2, [0, 0.5, 1, 1.5, 2, 2.5]),
        (8.0, [0, 2, 4, 6, 8]),
        (0.36, [0, 0.1, 0.2, 0.3, 0.4]),
        (0.0, [0, 1]),
    ],
)
def test_axis_ticks(peak: float, ticks: list[float]) -> None:
    assert nice_ticks(peak) == ticks


@given(st.floats(min_value=1e-3, max_value=1e6, allow_nan=False))
def test_ticks_cover_the_peak_with_distinct_labels(peak: float) -> None:
    svg = grouped_bars(["a", "b"], [("x", "#000", [peak, peak / 3])], "GPU-hours")
    labels = re.findall(r'text-anchor="end">([^<]+)</text>', svg)
    assert len(labels) == len(set(labels)) >= 2  # never "0, 1, 1, 2, 3"
    ticks = nice_ticks(peak)
    assert ticks[-2] < peak <= ticks[-1] * (1 + 1e-9) and len(ticks) <= 6  # float noise aside
