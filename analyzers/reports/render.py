"""A weekly report as self-contained HTML (inline CSS and SVG) and as Markdown for chat tools.

Both say the same things in the same order: headline numbers, efficiency trend, top findings with
evidence and the fix, jobs to look at, what improved; the admin report adds teams ranked by
recoverable GPU-hours. Numbers are formatted here and nowhere else. Never queries anything.
"""

from __future__ import annotations

import math
from html import escape

from analyzers.plain import UNPRICED, PlainFinding, plain_record
from analyzers.reports.build import FindingLine, Scope, WeeklyReport
from analyzers.reports.energy import energy_html, energy_markdown
from analyzers.reports.mfu import mfu_html, mfu_markdown
from analyzers.reports.svg import ACTIVE, ALLOCATED, WASTE, grouped_bars
from analyzers.reports.week import IsoWeek

CSS = """
body { font-family: -apple-system, 'Segoe UI', Roboto, sans-serif; color: #222; max-width: 860px;
       margin: 24px auto; padding: 0 16px; }
h1 { font-size: 24px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 28px; }
.sub { color: #666; margin-top: 0; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 10px 14px; min-width: 150px; }
.card b { display: block; font-size: 22px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { border-bottom: 1px solid #eee; padding: 5px 6px; text-align: left; vertical-align: top; }
td.n { text-align: right; white-space: nowrap; }
.sev-critical { color: #b00020; font-weight: bold; } .sev-warn { color: #b26a00; }
code { font-size: 12px; color: #555; }
.finding { border: 1px solid #ddd; border-radius: 6px; padding: 4px 14px 10px; margin: 10px 0;
           page-break-inside: avoid; }
.finding h3 { font-size: 15px; margin: 8px 0 4px; } .finding p { margin: 4px 0; }
table.evidence { width: auto; font-size: 12px; } table.evidence td:first-child { color: #666; }
.block { page-break-inside: avoid; break-inside: avoid; }
h2, h3 { page-break-after: avoid; break-after: avoid; }
.findings { page-break-before: always; break-before: page; }
"""

# Findings smaller than this go to the appendix: a page of 0.0 GPU-h cards reads as noise (issue 31).
APPENDIX_BELOW_GPU_H = 0.1
SUMMARY_CHART_PX = 120  # two charts, their tables, energy and the cards fit the first page


def ranked_findings(report: WeeklyReport) -> tuple[list[FindingLine], list[FindingLine]]:
    """(findings worth a card, the appendix's), each by recoverable GPU-hours, largest first."""
    ordered = sorted(report.findings, key=lambda f: -f.wasted_gpu_h)
    main = [f for f in ordered if f.wasted_gpu_h >= APPENDIX_BELOW_GPU_H]
    return main, [f for f in ordered if f.wasted_gpu_h < APPENDIX_BELOW_GPU_H]


def _settled(value: float) -> float:
    """`value` rounded at 1e-9 before it is shown: the same hours summed in another order (the
    embedded roll-ups, the fleet's raw scan) differ in the last bits, and a number exactly on a
    rounding edge (4.95 GPU-h) must show the same digit in either mode (as the dashboard's
    dashboard/views/fleet.py does)."""
    return round(value, 9)


def _h(hours: float) -> str:
    return f"{_settled(hours):,.1f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{_settled(value):.1f} %"


def title(scope: Scope, week: IsoWeek) -> str:
    return f"GPU efficiency, {scope.label}, week {week}"


def headline(report: WeeklyReport) -> list[tuple[str, str]]:
    week = report.this_week
    return [
        ("GPU-hours allocated", _h(week.allocated_h)),
        ("GPU-hours active", _h(week.active_h)),
        ("efficiency", _pct(week.efficiency_pct)),
        ("GPU-hours recoverable (est.)", _h(report.wasted_gpu_h)),
    ]


def to_html(report: WeeklyReport, dashboard_url: str = "") -> str:
    week = report.this_week
    out = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{escape(title(report.scope, report.week))}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title(report.scope, report.week))}</h1>",
        f"<p class='sub'>{report.week.start:%a %d %b %Y} to {report.week.end:%a %d %b %Y} (UTC)</p>",
        "<div class='cards'>",
        *(f"<div class='card'>{escape(k)}<b>{escape(v)}</b></div>" for k, v in headline(report)),
        "</div>",
        "<div class='block'><h2>Efficiency trend</h2>",
        grouped_bars(
            [w.week for w in report.trend],
            [
                ("allocated GPU-h", ALLOCATED, [w.allocated_h for w in report.trend]),
                ("active GPU-h", ACTIVE, [w.active_h for w in report.trend]),
            ],
            "GPU-hours",
            height=SUMMARY_CHART_PX,
        ),
        "<table><tr><th>week</th><th>allocated GPU-h</th><th>active GPU-h</th><th>efficiency</th></tr>",
        *(
            f"<tr><td>{w.week}</td><td class='n'>{_h(w.allocated_h)}</td>"
            f"<td class='n'>{_h(w.active_h)}</td><td class='n'>{_pct(w.efficiency_pct)}</td></tr>"
            for w in report.trend
            if w.allocated_h > 0  # the chart shows the empty weeks; the table only the rest
        ),
        "</table></div>",
    ]
    if report.teams:
        out += [
            "<div class='block'><h2>Teams, by recoverable GPU-hours</h2>",
            grouped_bars(
                [t.team for t in report.teams],
                [
                    ("allocated GPU-h", ALLOCATED, [t.allocated_h for t in report.teams]),
                    ("recoverable GPU-h", WASTE, [t.wasted_gpu_h for t in report.teams]),
                ],
                "GPU-hours",
                height=SUMMARY_CHART_PX,
            ),
            "<table><tr><th>team</th><th>allocated GPU-h</th><th>efficiency</th><th>recoverable GPU-h</th></tr>",
            *(
                f"<tr><td>{escape(t.team)}</td><td class='n'>{_h(t.allocated_h)}</td>"
                f"<td class='n'>{_pct(t.efficiency_pct)}</td><td class='n'>{_h(t.wasted_gpu_h)}</td></tr>"
                for t in report.teams
            ),
            "</table></div>",
        ]
    if report.energy:  # one block: a table cut across pages loses its header
        out += ["<div class='block'>", *energy_html(report.energy), "</div>"]
    if report.mfu:
        out += ["<div class='block'>", *mfu_html(report.mfu), "</div>"]
    if report.sharing:
        out += [
            "<div class='block'><h2>GPU sharing plan</h2>",
            "<table><tr><th>mechanism</th><th>GPU</th><th>jobs</th><th>GPUs freed</th>"
            "<th>GPU-h per week</th><th>worst slowdown</th></tr>",
            *(
                f"<tr><td>{escape(s.mechanism)}</td><td>{escape(s.gpu)}</td>"
                f"<td>{escape(', '.join(s.jobs))}</td><td class='n'>{s.gpus_freed}</td>"
                f"<td class='n'>{_h(s.freed_gpu_h_per_week)}</td>"
                f"<td class='n'>{s.worst_slowdown_pct:.0f} %</td></tr>"
                for s in report.sharing
            ),
            "</table></div>",
        ]
    main, small = ranked_findings(report)
    out.append("<div class='findings'><h2>Findings, by recoverable GPU-hours</h2>")
    if main:
        out += [_finding_html(f) for f in main]
    elif small:
        out.append(
            f"<p>No finding reaches {APPENDIX_BELOW_GPU_H} GPU-h; the smaller ones are in "
            "the appendix.</p>"
        )
    else:
        out.append("<p>No findings this week.</p>")
    out.append("</div><div class='block'><h2>Jobs to look at</h2>")
    if report.jobs:
        out.append(
            "<table><tr><th>job</th><th>user</th><th>GPUs</th><th>allocated GPU-h</th>"
            "<th>active</th><th>idle GPU-h</th></tr>"
        )
        for j in report.jobs:
            link = escape(j.job_id)
            if dashboard_url:
                href = f"{dashboard_url.rstrip('/')}/job?job_id={escape(j.job_id)}"
                link = f"<a href='{href}'>{link}</a>"
            out.append(
                f"<tr><td>{link}</td><td>{escape(j.user or '-')}</td><td class='n'>{j.gpus}</td>"
                f"<td class='n'>{_h(j.allocated_h)}</td><td class='n'>{_pct(j.active_pct)}</td>"
                f"<td class='n'>{_h(j.idle_h)}</td></tr>"
            )
        out.append("</table>")
    else:
        out.append("<p>No jobs ran this week.</p>")
    out.append("</div><div class='block'><h2>Since last week</h2>")
    items = report.improved or ["Nothing improved measurably since last week."]
    out.append("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in items) + "</ul></div>")
    if small:
        out += [
            f"<div class='block'><h2>Appendix: findings under {APPENDIX_BELOW_GPU_H} GPU-h</h2>",
            "<table><tr><th>rule</th><th>job</th><th>problem</th><th>recoverable GPU-h</th></tr>",
            *(_appendix_row(f) for f in small),
            "</table></div>",
        ]
    out.append(
        "<p class='sub'>Allocated GPU-hours: time a GPU is held by a job; active GPU-hours: "
        "allocated hours x GR_ENGINE_ACTIVE (else GPU_UTIL); recoverable: what a finding's fix "
        f"gives back. {_h(week.allocated_h)} GPU-h allocated this week.</p></body></html>"
    )
    return "\n".join(out)


def _under_cut(hours: float) -> str:
    """An appendix finding's hours, rounded down to 3 decimals: every one is under
    APPENDIX_BELOW_GPU_H, and 0.0999 shown as "0.10" would read as at the cut."""
    return f"{math.floor(hours * 1000) / 1000:.3f}"


def _appendix_row(f: FindingLine) -> str:
    p = _plain(f)
    hours = _under_cut(f.wasted_gpu_h) if p.estimated else "not estimated"  # R15: unknown, not 0
    return (
        f"<tr><td>{escape(p.rule_id)} {escape(p.rule)}</td><td>{escape(f.job_id or '-')}</td>"
        f"<td>{escape(p.problem)}</td><td class='n'>{hours}</td></tr>"
    )


def _plain(f: FindingLine) -> PlainFinding:
    """The line's plain-language form (built with it; rebuilt for a line made by hand)."""
    if f.plain is not None:
        return f.plain
    return plain_record(
        {
            "rule_id": f.rule_id,
            "severity": f.severity,
            "job_id": f.job_id,
            "wasted_gpu_hours": f.wasted_gpu_h,
            "recommendation": f.recommendation,
            "estimate_method": f.estimate_method,
            "evidence": f.evidence,
        }
    )


def _finding_html(f: FindingLine) -> str:
    """One finding as a card: rule name, problem, fix, recoverable GPU-hours, evidence table."""
    p = _plain(f)
    rows = "".join(
        f"<tr><td>{escape(what)}</td><td>{escape(value)}</td></tr>" for what, value in p.evidence
    )
    owner = f" ({escape(f.user)})" if f.user else ""
    where = escape(", ".join(x for x in (p.where, p.when) if x))
    return (
        "<div class='finding'>"
        f"<h3><span class='sev-{escape(p.severity)}'>{escape(p.rule_id)} {escape(p.rule)}</span>"
        f" · {_h(f.wasted_gpu_h)} GPU-h recoverable</h3>"
        f"<p><b>Problem:</b> {escape(p.problem)}<br><b>Fix:</b> {escape(p.fix)}</p>"
        f"<p class='sub'>{where}{owner}. Estimate: {escape(p.estimate)}</p>"
        f"<table class='evidence'>{rows}</table></div>"
    )


def to_markdown(report: WeeklyReport) -> str:
    lines = [f"**{title(report.scope, report.week)}**", ""]
    lines += [f"- {k}: **{v}**" for k, v in headline(report)]
    lines += ["", "Efficiency trend:", "", "| week | allocated GPU-h | active GPU-h | efficiency |"]
    lines += ["|---|---:|---:|---:|"]
    lines += [
        f"| {w.week} | {_h(w.allocated_h)} | {_h(w.active_h)} | {_pct(w.efficiency_pct)} |"
        for w in report.trend
    ]
    if report.teams:
        lines += ["", "Teams by recoverable GPU-hours:", "", "| team | allocated GPU-h | efficiency | recoverable GPU-h |", "|---|---:|---:|---:|"]  # fmt: skip
        lines += [
            f"| {t.team} | {_h(t.allocated_h)} | {_pct(t.efficiency_pct)} | {_h(t.wasted_gpu_h)} |"
            for t in report.teams
        ]
    lines += energy_markdown(report.energy) if report.energy else []
    lines += mfu_markdown(report.mfu) if report.mfu else []
    if report.sharing:
        lines += ["", "GPU sharing plan:"]
        lines += [
            f"- {s.mechanism} on one {s.gpu}: {', '.join(s.jobs)}; frees {s.gpus_freed} GPU(s), "
            f"{_h(s.freed_gpu_h_per_week)} GPU-h/week, worst slowdown {s.worst_slowdown_pct:.0f} %"
            for s in report.sharing
        ]
    main, small = ranked_findings(report)
    lines += ["", "Findings, by recoverable GPU-hours:"]
    for f in main:
        p = _plain(f)
        lines += [
            f"- **{p.rule_id} {p.rule}** on {p.where or '-'}: {p.problem}. "
            f"{_h(f.wasted_gpu_h)} GPU-h recoverable. Fix: {p.fix}",
            *(f"  - {what}: {value}" for what, value in p.evidence),
        ]
    if not main:
        lines.append("- none" if not small else f"- none of {APPENDIX_BELOW_GPU_H} GPU-h or more")
    lines += ["", "Jobs to look at:"]
    lines += [
        f"- {j.job_id} ({j.user or '-'}): {_h(j.allocated_h)} GPU-h, active {_pct(j.active_pct)}"
        for j in report.jobs
    ] or ["- none"]
    lines += ["", "Since last week:"]
    lines += [f"- {line}" for line in report.improved] or ["- nothing improved measurably"]
    if small:
        lines += ["", f"Appendix: findings under {APPENDIX_BELOW_GPU_H} GPU-h:"]
        for f in small:
            p = _plain(f)
            hours = f"{_under_cut(f.wasted_gpu_h)} GPU-h" if p.estimated else UNPRICED
            lines.append(f"- {p.rule_id} {p.rule} on {f.job_id or '-'}: {hours}")
    return "\n".join(lines) + "\n"
