"""Fleet ranking: where the recoverable GPU-hours are, by rule and by team, user, job or model.

What an infra lead reads first (`fleetscope opportunities --window 7d`). Per-rule lines sum each
rule's own estimate. Totals per group never count an hour twice: when several rules flag the same
job in the same identity bucket (an idle job is R1 and R3; a starved one P1 and R2), the job's
recoverable hours there are the largest single estimate, not the sum. Each line carries the
recoverable kWh and money of the same findings beside its hours (analyzers.accounting.recoverable:
money only where prices are set). Suppressed findings are left out by the store. This module must
never query telemetry.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from analyzers.base import JobCatalog
from analyzers.findings import Finding

GroupBy = Literal["team", "user", "job", "model"]
T = TypeVar("T")


@dataclass
class Line:
    key: str
    gpu_hours: float = 0.0
    kwh: float = 0.0  # recoverable energy of the same findings (where measured)
    money: float | None = None  # recoverable money, None where no price applied
    findings: int = 0
    jobs: set[str] = field(default_factory=set)
    rules: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    @property
    def top_rule(self) -> str:
        return max(self.rules, key=lambda r: self.rules[r]) if self.rules else "-"


@dataclass
class Opportunities:
    total_gpu_hours: float
    by_rule: list[Line]
    by_group: list[Line]
    top_jobs: list[Line]
    group_by: GroupBy
    total_kwh: float = 0.0
    total_money: float | None = None
    currency: str = ""


def _add(line: Line, finding: Finding) -> None:
    """The finding's hours, kWh and money onto `line`."""
    line.gpu_hours += finding.wasted_gpu_hours
    kwh, money = finding.evidence.get("recoverable_kwh"), finding.evidence.get("recoverable_money")
    if isinstance(kwh, int | float):
        line.kwh += float(kwh)
    if isinstance(money, int | float):
        line.money = (line.money or 0.0) + float(money)


def _group_key(finding: Finding, by: GroupBy, catalog: JobCatalog | None) -> str:
    if by == "job":
        return finding.job_name or finding.job_id or "(no job)"
    if by == "model":
        info = catalog.get(finding.job_id) if catalog and finding.job_id else None
        return (info.model if info else None) or "(unknown model)"
    value = finding.team if by == "team" else finding.user
    return value or f"(no {by})"


def counted_once(
    items: Iterable[T], job_bucket: Callable[[T], tuple[str, str]], hours: Callable[[T], float]
) -> list[T]:
    """The count-once rule, the one place it is written: per (job, identity bucket) only the
    largest estimate of the rules that flagged it (an idle job is R1 and R3; a starved one P1
    and R2). `job_bucket` gives a finding's job (its own id when it has none) and bucket start."""
    best: dict[tuple[str, str], T] = {}
    for item in items:
        key = job_bucket(item)
        current = best.get(key)
        if current is None or hours(item) > hours(current):
            best[key] = item
    return list(best.values())


def rank(
    findings: Sequence[Finding],
    *,
    by: GroupBy = "team",
    catalog: JobCatalog | None = None,
    top: int = 10,
) -> Opportunities:
    by_rule: dict[str, Line] = {}
    for f in findings:
        line = by_rule.setdefault(f.rule_id, Line(f.rule_id))
        _add(line, f)
        line.findings += 1
        line.rules[f.rule_id] += f.wasted_gpu_hours
        if f.job_id:
            line.jobs.add(f.job_id)
    best = counted_once(
        findings,
        lambda f: (f.job_id or f.finding_id, (f.bucket_start or f.window_start).isoformat()),
        lambda f: f.wasted_gpu_hours,
    )
    groups: dict[str, Line] = {}
    jobs: dict[str, Line] = {}
    for f in findings:
        g = groups.setdefault(_group_key(f, by, catalog), Line(_group_key(f, by, catalog)))
        g.findings += 1
        g.rules[f.rule_id] += f.wasted_gpu_hours
        if f.job_id:
            g.jobs.add(f.job_id)
            j = jobs.setdefault(f.job_id, Line(f.job_id))
            j.findings += 1
            j.rules[f.rule_id] += f.wasted_gpu_hours
            j.jobs.add(f.job_id)
    total = Line("total")
    for f in best:
        _add(groups[_group_key(f, by, catalog)], f)
        _add(total, f)
        if f.job_id:
            _add(jobs[f.job_id], f)
    currencies = {str(f.evidence.get("currency")) for f in best if "currency" in f.evidence}
    return Opportunities(
        total_gpu_hours=total.gpu_hours,
        by_rule=_order(by_rule.values()),
        by_group=_order(groups.values())[:top],
        top_jobs=_order(jobs.values())[:top],
        group_by=by,
        total_kwh=total.kwh,
        total_money=total.money,
        currency=", ".join(sorted(currencies)),
    )


def _order(lines: Iterable[Line]) -> list[Line]:
    return sorted(lines, key=lambda x: (-x.gpu_hours, x.key))


def render(report: Opportunities, window_label: str) -> str:
    """The plain-text report the CLI prints."""
    out = [
        f"Recoverable GPU-hours, last {window_label}: {report.total_gpu_hours:,.1f} "
        "(overlapping rules on one job counted once)",
        f"Recoverable energy: {report.total_kwh:,.1f} kWh"
        + (
            f"; money: {report.total_money:,.2f} {report.currency} (where prices are set)"
            if report.total_money is not None
            else ""
        ),
        "",
        f"{'rule':<6} {'GPU-h':>10} {'findings':>9} {'jobs':>6} {'kWh':>9}{_money_head(report)}",
    ]
    out += [
        f"{x.key:<6} {x.gpu_hours:>10,.1f} {x.findings:>9} {len(x.jobs):>6} {x.kwh:>9,.1f}"
        f"{_money(report, x)}"
        for x in report.by_rule
        if x.gpu_hours
    ]
    if risks := no_hours(report.by_rule):
        out.append(f"flagged, no GPU-hours to recover: {risks}")
    # the name column as wide as its longest name: a job id is never cut (issue 31)
    width = max([28, *(len(x.key) for x in (*report.by_group, *report.top_jobs))])
    out += ["", f"{'by ' + report.group_by:<{width}} {'GPU-h':>10} {'jobs':>6}  top rule"]
    out += [
        f"{x.key:<{width}} {x.gpu_hours:>10,.1f} {len(x.jobs):>6}  {x.top_rule}"
        for x in report.by_group
    ]
    out += ["", f"{'top offenders (job)':<{width}} {'GPU-h':>10}  rules"]
    out += [
        f"{x.key:<{width}} {x.gpu_hours:>10,.1f}  {', '.join(sorted(x.rules))}"
        for x in report.top_jobs
    ]
    return "\n".join(out)


def no_hours(by_rule: Iterable[Line]) -> str:
    """The rules whose findings estimate no recoverable hours (memory creep, fragmentation: a
    risk, not idle time), as one line below the ranked table: listed at 0.0 GPU-h among the
    ranked rules they read as a ranking error beside their hundreds of findings."""
    return "; ".join(
        f"{x.key} ({counted(x.findings, 'finding')}, {counted(len(x.jobs), 'job')})"
        for x in by_rule
        if not x.gpu_hours
    )


def counted(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' * (n != 1)}"


def _money_head(report: Opportunities) -> str:
    return f" {report.currency:>10}" if report.total_money is not None else ""


def _money(report: Opportunities, line: Line) -> str:
    if report.total_money is None:
        return ""
    return f" {'n/a' if line.money is None else f'{line.money:,.2f}':>10}"
