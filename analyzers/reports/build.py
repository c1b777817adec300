"""The weekly efficiency report's content: numbers from the warehouse and findings from the catalog.

Modelled on what Princeton's jobstats and job_defense_shield mail to users (GPU-hours used,
utilization, the jobs to look at, what to change), with the evidence and the estimated savings of
each finding added. Three scopes: a team, a user, or the whole fleet ranked by team (admin).

Accounting is `analyzers.accounting.usage` (the dashboard's too), after `analyzers.accounting.sql`.
Wasted GPU-hours never count an hour twice: per job and identity bucket the largest single
finding's estimate counts, the rule `analyzers.reports.ranking` states. This module reads only; rendering and delivery are elsewhere.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pandas as pd

from analyzers.accounting.cost import Prices
from analyzers.accounting.sql import DEFAULT_MAX_GAP_S
from analyzers.accounting.usage import gpu_buckets, job_efficiency, pct
from analyzers.plain import META, PlainFinding, plain_record
from analyzers.reports.energy import EnergySection, energy_section
from analyzers.reports.mfu import MfuSection, mfu_section
from analyzers.reports.ranking import counted_once
from analyzers.reports.week import IsoWeek
from analyzers.run.window import Window
from fleetscope.errors import ConfigError
from fleetscope.names import file_name_part

if TYPE_CHECKING:
    import duckdb
    import sqlalchemy

ScopeKind = Literal["admin", "team", "user"]
TOP_FINDINGS = 10
TOP_JOBS = 5
DAY_S = 86400


@dataclass(frozen=True)
class Scope:
    kind: ScopeKind
    value: str = "fleet"  # the team or user name; "fleet" for admin

    def __post_init__(self) -> None:
        if self.kind not in ("admin", "team", "user"):
            raise ConfigError(f"report scope must be admin, team or user, not {self.kind!r}")
        if not self.value:
            raise ConfigError(f"a {self.kind} report needs a {self.kind} name")

    @property
    def label(self) -> str:
        return "the whole fleet" if self.kind == "admin" else f"{self.kind} {self.value}"

    @property
    def slug(self) -> str:
        """The report's file name stem: safe whatever the team or user is called."""
        return "fleet" if self.kind == "admin" else f"{self.kind}-{file_name_part(self.value)}"


@dataclass(frozen=True)
class WeekUsage:
    week: str
    allocated_h: float
    active_h: float
    known_h: float

    @property
    def efficiency_pct(self) -> float | None:
        return 100.0 * self.active_h / self.known_h if self.known_h else None


@dataclass(frozen=True)
class FindingLine:
    rule_id: str
    severity: str
    job_id: str | None
    user: str | None
    team: str | None
    wasted_gpu_h: float
    recommendation: str
    estimate_method: str
    evidence: dict[str, Any]
    plain: PlainFinding | None = None  # the same words `fleetscope job` and the dashboard use


@dataclass(frozen=True)
class JobLine:
    job_id: str
    user: str | None
    team: str | None
    name: str | None
    gpus: int
    allocated_h: float
    active_pct: float | None
    idle_h: float


@dataclass(frozen=True)
class TeamLine:
    team: str
    allocated_h: float
    efficiency_pct: float | None
    wasted_gpu_h: float


@dataclass(frozen=True)
class SharingLine:
    """One proposed co-location of the week's sharing plan (docs/sharing.md)."""

    mechanism: str
    gpu: str
    jobs: tuple[str, ...]
    gpus_freed: int
    freed_gpu_h_per_week: float
    worst_slowdown_pct: float


@dataclass
class WeeklyReport:
    scope: Scope
    week: IsoWeek
    trend: list[WeekUsage]  # oldest first; the last is the report's week
    findings: list[FindingLine]
    wasted_gpu_h: float
    previous_wasted_gpu_h: float
    jobs: list[JobLine]
    teams: list[TeamLine] = field(default_factory=list)
    improved: list[str] = field(default_factory=list)
    sharing: list[SharingLine] = field(default_factory=list)  # admin: `fleetscope plan sharing`
    energy: EnergySection | None = None  # kWh, CO2e and money (analyzers.reports.energy)
    mfu: MfuSection | None = None  # measured MFU per SDK-attached job (analyzers.reports.mfu)

    @property
    def this_week(self) -> WeekUsage:
        return self.trend[-1]

    @property
    def last_week(self) -> WeekUsage | None:
        return self.trend[-2] if len(self.trend) > 1 else None


def _week_of(buckets: pd.Series) -> pd.Series:
    return buckets.map(lambda ts: str(IsoWeek.containing(ts.to_pydatetime())))


def _scoped(frame: pd.DataFrame, scope: Scope) -> pd.DataFrame:
    if scope.kind == "admin":
        return frame
    column = "team" if scope.kind == "team" else "user"
    if column not in frame.columns:
        return frame.iloc[0:0]
    return frame[frame[column] == scope.value]


def deduplicated_waste(findings: pd.DataFrame) -> float:
    """Recoverable GPU-hours of catalog finding rows, each job's hours in a bucket counted once
    (`ranking.counted_once`: what `fleetscope opportunities` and the dashboard total)."""
    if findings.empty:
        return 0.0
    rows: list[dict[str, Any]] = [
        {str(k): v for k, v in r.items()} for r in findings.to_dict("records")
    ]
    return float(sum(r["wasted_gpu_hours"] for r in counted_once(rows, _job_bucket, _hours_of)))


def deduplicated_recoverable(findings: pd.DataFrame) -> tuple[float, float | None, str]:
    """The recoverable kWh and money (None: no price applied) of the same findings
    `deduplicated_waste` counts (analyzers.accounting.recoverable puts them in the evidence), and
    the currency the findings priced it in ("" when none says, or they disagree)."""
    if findings.empty:
        return 0.0, None, ""
    rows: list[dict[str, Any]] = [
        {str(k): v for k, v in r.items()} for r in findings.to_dict("records")
    ]
    kwh, money, currencies = 0.0, None, set()
    for row in counted_once(rows, _job_bucket, _hours_of):
        evidence = row.get("evidence") or {}
        if isinstance(evidence, str):
            evidence = json.loads(evidence)
        if isinstance(evidence.get("recoverable_kwh"), int | float):
            kwh += float(evidence["recoverable_kwh"])
        if isinstance(evidence.get("recoverable_money"), int | float):
            money = (money or 0.0) + float(evidence["recoverable_money"])
            currencies.add(str(evidence.get("currency") or ""))
    return kwh, money, currencies.pop() if len(currencies) == 1 else ""


def _job_bucket(row: dict[str, Any]) -> tuple[str, str]:
    job = _opt(row.get("job_id")) or str(row["finding_id"])
    evidence = row.get("evidence") or {}
    if isinstance(evidence, str):
        evidence = json.loads(evidence)
    bucket = (evidence.get(META) or {}).get("bucket_start")
    return job, str(bucket) if bucket else pd.Timestamp(row["window_start"]).isoformat()


def _hours_of(row: dict[str, Any]) -> float:
    return float(row["wasted_gpu_hours"])


def _findings_in(findings: pd.DataFrame, week: IsoWeek) -> pd.DataFrame:
    if findings.empty:
        return findings
    starts = pd.to_datetime(findings["window_start"], utc=True)
    open_ = findings["state"].fillna("open") != "suppressed" if "state" in findings else True
    return findings[(starts >= week.start) & (starts < week.end) & open_]


def build_weekly(
    con: duckdb.DuckDBPyConnection,
    catalog: sqlalchemy.Engine,
    week: IsoWeek,
    scope: Scope,
    *,
    trend_weeks: int = 6,
    default_interval_s: float = 10.0,
    max_gap_s: float = DEFAULT_MAX_GAP_S,
    prices: Prices | None = None,
) -> WeeklyReport:
    """Everything one weekly report says, for `scope` over `week` (and the trend before it).

    `default_interval_s` and `max_gap_s` are the accounting's (`analyzers.accounting.sql`)."""
    from analyzers.reports.catalog_frames import catalog_frame

    jobs_meta = catalog_frame(catalog, "jobs")[["job_id", "user", "team", "name"]]
    all_findings = catalog_frame(catalog, "findings")
    first = week.shift(-(trend_weeks - 1))
    window = Window(first.start, week.end, bucket_s=DAY_S)
    buckets = gpu_buckets(con, window, default_interval_s, max_gap_s=max_gap_s)
    allocated = buckets[buckets["job_id"].notna()].merge(jobs_meta, on="job_id", how="left")
    allocated["week"] = _week_of(allocated["bucket"])
    mine = _scoped(allocated, scope)

    labels = [str(first.shift(number)) for number in range(trend_weeks)]
    per_week = mine.groupby("week")[["gpu_h", "active_h", "known_h"]].sum().reindex(labels)
    per_week = per_week.fillna(0.0).reset_index(names="week")
    trend = [
        WeekUsage(str(r["week"]), float(r["gpu_h"]), float(r["active_h"]), float(r["known_h"]))
        for r in per_week.to_dict("records")
    ]

    this_week_rows = mine[mine["week"] == str(week)]
    per_job = job_efficiency(this_week_rows.drop(columns=["user", "team", "name"]), jobs_meta)
    jobs = [
        JobLine(
            job_id=str(r["job_id"]),
            user=_opt(r["user"]),
            team=_opt(r["team"]),
            name=_opt(r["name"]),
            gpus=int(r["gpus"]),
            allocated_h=float(r["allocated_h"]),
            active_pct=None if pd.isna(r["active_pct"]) else float(r["active_pct"]),
            idle_h=float(r["idle_h"]),
        )
        for r in per_job.head(TOP_JOBS).to_dict("records")
    ]

    now_findings = _scoped(_findings_in(all_findings, week), scope)
    before_findings = _scoped(_findings_in(all_findings, week.shift(-1)), scope)
    ranked = now_findings.sort_values(["wasted_gpu_hours", "finding_id"], ascending=[False, True])
    findings = [
        FindingLine(
            rule_id=str(r["rule_id"]),
            severity=str(r["severity"]),
            job_id=_opt(r["job_id"]),
            user=_opt(r["user"]),
            team=_opt(r["team"]),
            wasted_gpu_h=float(r["wasted_gpu_hours"]),
            recommendation=str(r["recommendation"] or ""),
            estimate_method=str(r["estimate_method"] or ""),
            evidence=dict(r["evidence"] or {}),
            plain=plain_record(r),
        )
        for r in ranked.head(TOP_FINDINGS).to_dict("records")
    ]
    report = WeeklyReport(
        scope=scope,
        week=week,
        trend=trend,
        findings=findings,
        wasted_gpu_h=deduplicated_waste(now_findings),
        previous_wasted_gpu_h=deduplicated_waste(before_findings),
        jobs=jobs,
    )
    if scope.kind == "admin":
        report.teams = _teams(this_week_rows, now_findings)
        report.sharing = sharing_lines(con, week)
    report.improved = _improvements(report, now_findings, before_findings)
    report.energy = energy_section(
        con,
        catalog_frame(catalog, "jobs"),
        Window(week.start, week.end),
        None if scope.kind == "admin" else (scope.kind, scope.value),
        prices or Prices(),
        default_interval_s=default_interval_s,
        max_gap_s=max_gap_s,
        note=(prices or Prices()).note,
    )
    (
        report.energy.recoverable_kwh,
        report.energy.recoverable_money,
        report.energy.recoverable_currency,
    ) = deduplicated_recoverable(now_findings)
    report.energy.recoverable_gpu_h = report.wasted_gpu_h
    report.mfu = mfu_section(
        con,
        catalog_frame(catalog, "jobs"),
        Window(week.start, week.end),
        None if scope.kind == "admin" else (scope.kind, scope.value),
        prices or Prices(),
        default_interval_s=default_interval_s,
        max_gap_s=max_gap_s,
    )
    return report


def sharing_lines(con: duckdb.DuckDBPyConnection, week: IsoWeek) -> list[SharingLine]:
    """The week's GPU-sharing plan (analyzers.sharing), one line per co-location."""
    from analyzers.sharing.plan import plan_sharing
    from analyzers.sharing.usage import gpu_uses

    window = Window(week.start, week.end)
    plan = plan_sharing(gpu_uses(con, window), window.hours)
    return [
        SharingLine(
            g.mechanism,
            g.product,
            tuple(m.use.job_id for m in g.members),
            g.gpus_freed,
            g.freed_gpu_hours_per_week,
            100 * max(m.expected_slowdown - 1 for m in g.members),
        )
        for g in plan.groups
    ]


def _opt(value: object) -> str | None:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def _teams(rows: pd.DataFrame, findings: pd.DataFrame) -> list[TeamLine]:
    """Teams ranked by recoverable GPU-hours, then by allocated hours."""
    usage = (
        rows.assign(team=rows["team"].fillna("(no team)"))
        .groupby("team")[["gpu_h", "active_h", "known_h"]]
        .sum()
    )
    waste: dict[str, float] = {}
    if not findings.empty:
        teams = findings.assign(team=findings["team"].fillna("(no team)"))
        waste = {str(t): deduplicated_waste(g) for t, g in teams.groupby("team")}
    usage["efficiency_pct"] = pct(usage["active_h"], usage["known_h"])
    lines = [
        TeamLine(
            team=str(r["team"]),
            allocated_h=float(r["gpu_h"]),
            efficiency_pct=None if pd.isna(r["efficiency_pct"]) else float(r["efficiency_pct"]),
            wasted_gpu_h=waste.get(str(r["team"]), 0.0),
        )
        for r in usage.reset_index().to_dict("records")
    ]
    return sorted(lines, key=lambda line: (-line.wasted_gpu_h, -line.allocated_h, line.team))


def _improvements(
    report: WeeklyReport, now_findings: pd.DataFrame, before_findings: pd.DataFrame
) -> list[str]:
    """What got better since last week, in plain words (empty when nothing did)."""
    lines: list[str] = []
    last = report.last_week
    now_eff, last_eff = report.this_week.efficiency_pct, last.efficiency_pct if last else None
    if now_eff is not None and last_eff is not None and now_eff > last_eff:
        lines.append(f"GPU efficiency rose from {last_eff:.1f} % to {now_eff:.1f} %.")
    if report.previous_wasted_gpu_h > report.wasted_gpu_h:
        saved = report.previous_wasted_gpu_h - report.wasted_gpu_h
        lines.append(f"{saved:,.1f} fewer recoverable GPU-hours than last week.")
    before_rules = set(before_findings["rule_id"]) if not before_findings.empty else set()
    now_rules = set(now_findings["rule_id"]) if not now_findings.empty else set()
    for rule in sorted(before_rules - now_rules):
        lines.append(f"No more {rule} findings (there were some last week).")
    return lines
