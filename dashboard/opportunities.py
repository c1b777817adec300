"""The fleet page's Opportunities: the rows `fleetscope opportunities` prints for the page's window,
with the previous window of the same length beside them.

The ranking is `analyzers.reports.ranking.rank` over the findings `analyzers.run.results.FindingStore` returns
(overlapping the window, suppressed ones left out): per-rule sums, and per-team totals that count
a job's hours once when several rules flag it. This module only lays the ranking's lines out as
tables, so the page and the CLI cannot disagree. Reads the catalog; never writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import pandas as pd

from analyzers.accounting.usage import pct
from analyzers.plain import PlainFinding, plain, rule_name
from analyzers.reports.ranking import Line, Opportunities, rank

if TYPE_CHECKING:
    import sqlalchemy

    from analyzers.findings import Finding

TOP = 10  # `fleetscope opportunities --top` default: the page shows the same rows
TOP_FINDINGS = 3  # the fleet page's "Top findings"

RULE_COLUMNS = [
    "rule_id", "rule", "wasted_gpu_h", "findings", "jobs", "previous_gpu_h", "change_pct",
]  # fmt: skip


@dataclass(frozen=True)
class OpportunityTables:
    """What the page draws: the window's total, per rule and per team, each with the previous
    window's GPU-hours and the change in percent (NaN where there were none before)."""

    total_gpu_h: float
    previous_total_gpu_h: float
    by_rule: pd.DataFrame
    by_team: pd.DataFrame
    costliest: tuple[PlainFinding, ...] = ()  # the window's TOP_FINDINGS costliest, in words


def window_findings(
    engine: sqlalchemy.Engine | None, since: datetime, until: datetime
) -> list[Finding]:
    """`fleetscope opportunities`' store query for [since, until): the findings overlapping it,
    suppressed ones left out, most wasted first. A catalog not created yet (a dashboard started
    before the server) has none."""
    if engine is None or not _has_findings(engine):
        return []
    from analyzers.run.results import FindingStore

    return [s.finding for s in FindingStore(engine).findings(since=since, until=until)]


def ranked(
    engine: sqlalchemy.Engine | None,
    since: datetime,
    until: datetime,
    top: int = TOP,
    found: Sequence[Finding] | None = None,
) -> Opportunities:
    """`fleetscope opportunities --by team` for [since, until): the same store query and the same
    ranking; `found`: the window's `window_findings` where the caller has them already."""
    found = window_findings(engine, since, until) if found is None else found
    if engine is None or not found:
        return rank([], by="team", top=top)
    from analyzers.run.results import CatalogJobs

    return rank(found, by="team", catalog=CatalogJobs(engine), top=top)


def _has_findings(engine: sqlalchemy.Engine) -> bool:
    import sqlalchemy

    try:
        return bool(sqlalchemy.inspect(engine).has_table("findings"))
    except sqlalchemy.exc.OperationalError:
        return False


def lines_frame(lines: Sequence[Line], key: str) -> pd.DataFrame:
    """Ranking lines as rows: key, recoverable GPU-hours, findings, distinct jobs, top rule."""
    return pd.DataFrame(
        {
            key: [line.key for line in lines],
            "wasted_gpu_h": [line.gpu_hours for line in lines],
            "findings": [line.findings for line in lines],
            "jobs": [len(line.jobs) for line in lines],
            "top_rule": [line.top_rule for line in lines],
        }
    ).astype({key: "str", "wasted_gpu_h": "float64", "findings": "int64", "jobs": "int64"})


def _beside(now: pd.DataFrame, before: pd.DataFrame, key: str) -> pd.DataFrame:
    previous = before.set_index(key)["wasted_gpu_h"]
    table = now.assign(previous_gpu_h=now[key].map(previous).fillna(0.0).astype("float64"))
    table["change_pct"] = pct(
        table["wasted_gpu_h"] - table["previous_gpu_h"], table["previous_gpu_h"]
    )
    return table


def tables(engine: sqlalchemy.Engine | None, start: datetime, end: datetime) -> OpportunityTables:
    """The page's tables for [start, end) by team (the CLI's default `--by`), the previous window
    [start - length, start) beside them, and the window's costliest findings: one read of the
    window's findings for both (decoding the 1,000-GPU week's 3,580 findings is ~0.35 s, and the
    page read them twice)."""
    found = window_findings(engine, start, end)
    now = ranked(engine, start, end, found=found)
    before = ranked(engine, start - (end - start), start, top=1_000_000)
    by_rule = _beside(
        lines_frame(now.by_rule, "rule_id"), lines_frame(before.by_rule, "rule_id"), "rule_id"
    )
    by_team = _beside(
        lines_frame(now.by_group, "team"), lines_frame(before.by_group, "team"), "team"
    )
    by_rule["rule"] = [rule_name(r) for r in by_rule["rule_id"]]
    return OpportunityTables(
        total_gpu_h=now.total_gpu_hours,
        previous_total_gpu_h=before.total_gpu_hours,
        by_rule=by_rule[RULE_COLUMNS],
        by_team=by_team,
        costliest=tuple(plain(f) for f in costliest(found)),
    )


def per_job(engine: sqlalchemy.Engine | None, start: datetime, end: datetime) -> pd.DataFrame:
    """Each job's findings in [start, end) (suppressed ones left out) and the GPU-hours their
    fixes would return, counted once where several rules flag the job in one bucket: the
    ranking's own job lines, so the Jobs page adds up to the Fleet page's total."""
    lines = ranked(engine, start, end, top=1_000_000).top_jobs
    frame = lines_frame(lines, "job_id")
    return frame[["job_id", "findings", "wasted_gpu_h"]]


def costliest(found: Sequence[Finding], top: int = TOP_FINDINGS) -> list[Finding]:
    """The `top` costliest of a window's findings (`window_findings`), ties by finding id."""
    return sorted(found, key=lambda f: (-f.wasted_gpu_hours, f.finding_id))[:top]
