"""The weekly report's MFU section: each SDK-attached job's measured MFU beside its team's median
on the same GPU model and dtype (P4's yardstick), with the job's kWh and, where prices are set,
money. Only measured MFU: DCGM's tensor-pipe proxy is never mixed in here (docs/analyzers.md,
"MFU"). A week with no job that reported FLOPs has no section. Never writes anything.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING, Final

import pandas as pd

from analyzers.accounting.cost import Prices
from analyzers.accounting.energy import job_energy
from analyzers.mfu.measured import job_mfu
from analyzers.mfu.mfu import percent
from analyzers.run.window import Window

if TYPE_CHECKING:
    import duckdb

TOP_JOBS: Final = 12  # the lowest MFUs first: the jobs worth a look


@dataclass
class MfuLine:
    job_id: str
    team: str
    gpu_model: str
    dtype: str
    mfu: float
    team_median: float
    kwh: float | None
    money: float | None


@dataclass
class MfuSection:
    jobs: list[MfuLine] = field(default_factory=list)
    measured_jobs: int = 0
    currency: str = ""
    note: str = ""


def mfu_section(
    con: duckdb.DuckDBPyConnection,
    jobs_meta: pd.DataFrame,
    window: Window,
    only: tuple[str, str] | None,
    prices: Prices,
    *,
    default_interval_s: float,
    max_gap_s: float,
) -> MfuSection | None:
    """The window's measured MFU per job, lowest first; `only`: (team or user, its name)."""
    measured = job_mfu(con, window)
    if not measured:
        return None
    meta = {str(r["job_id"]): r for r in jobs_meta.to_dict("records")}
    rows = []
    for job_id, (mfu, row) in measured.items():
        info = meta.get(job_id, {})
        team = _opt(info.get("team")) or "(no team)"
        if only is not None and _opt(info.get(only[0])) != only[1]:
            continue
        rows.append((job_id, team, str(row["gpu_model"]), str(row["dtype"]), mfu.value))
    if not rows:
        return None
    groups: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for _, team, model, dtype, value in rows:
        groups[(team, model, dtype)].append(value)
    energy = job_energy(
        con, window, default_interval_s, max_gap_s=max_gap_s, jobs=[r[0] for r in rows]
    )
    by_job = {str(r["job_id"]): r for r in energy.to_dict("records")}
    lines = []
    for job_id, team, model, dtype, value in rows:
        found = by_job.get(job_id)
        kwh = None if found is None or pd.isna(found["energy_kwh"]) else float(found["energy_kwh"])
        money = (
            None
            if found is None
            else prices.money(float(found["gpu_h"]), model, team, _opt(found["cluster"]))
        )
        median = statistics.median(groups[(team, model, dtype)])
        lines.append(MfuLine(job_id, team, model, dtype, value, median, kwh, money))
    lines.sort(key=lambda line: (line.mfu, line.job_id))
    return MfuSection(
        lines[:TOP_JOBS], len(lines), prices.currency if prices.priced else "", prices.note
    )


def _opt(value: object) -> str | None:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def _cells(line: MfuLine, section: MfuSection) -> list[str]:
    cells = [
        line.job_id,
        line.team,
        f"{line.gpu_model} ({line.dtype})",
        percent(line.mfu),
        percent(line.team_median),
        "n/a" if line.kwh is None else f"{line.kwh:,.2f}",
    ]
    if section.currency:
        cells.append("n/a" if line.money is None else f"{line.money:,.2f}")
    return cells


def _header(section: MfuSection) -> list[str]:
    head = ["job", "team", "GPU (dtype)", "MFU (measured)", "team median", "kWh"]
    return [*head, f"cost ({section.currency})"] if section.currency else head


def _caption(section: MfuSection) -> str:
    shown = len(section.jobs)
    more = f"; the {shown} lowest shown" if section.measured_jobs > shown else ""
    return (
        f"{section.measured_jobs} job(s) reported FLOPs through the SDK{more}. MFU = FLOPs per "
        "step x steps per second / (GPUs x the dense datasheet peak of the GPU model and dtype); "
        "the team median is over the team's jobs on the same GPU model and dtype."
    )


def mfu_html(section: MfuSection) -> list[str]:
    numeric = set(range(3, len(_header(section))))
    out = [
        "<h2>Model FLOPs utilization (measured)</h2>",
        "<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in _header(section)) + "</tr>",
        *(
            "<tr>"
            + "".join(
                f"<td class='n'>{escape(c)}</td>" if i in numeric else f"<td>{escape(c)}</td>"
                for i, c in enumerate(_cells(line, section))
            )
            + "</tr>"
            for line in section.jobs
        ),
        "</table>",
        f"<p class='sub'>{escape(_caption(section))}</p>",
    ]
    if section.currency and section.note:
        out.append(f"<p class='sub'>{escape(section.note)}</p>")
    return out


def mfu_markdown(section: MfuSection) -> list[str]:
    head = _header(section)
    out = ["", "Model FLOPs utilization (measured):", "", "| " + " | ".join(head) + " |"]
    out.append("|---|---|---|" + "---:|" * (len(head) - 3))
    out += ["| " + " | ".join(_cells(line, section)) + " |" for line in section.jobs]
    out += ["", _caption(section)]
    return out
