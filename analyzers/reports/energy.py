"""The weekly report's energy and money section: kWh, idle-allocated kWh, CO2e and money per team
(and the scope's total), from analyzers.accounting.energy and the prices set
(analyzers.accounting.cost). A report whose deployment sets no prices shows no money; one that
sets no grid intensity shows no CO2e. Never writes anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING

import pandas as pd

from analyzers.accounting.cost import Prices
from analyzers.accounting.energy import job_energy
from analyzers.run.window import Window

if TYPE_CHECKING:
    import duckdb


@dataclass
class EnergyLine:
    team: str
    gpu_h: float
    kwh: float
    idle_kwh: float
    co2e_kg: float | None = None
    money: float | None = None  # None: no price applies to any of its GPU-hours


@dataclass
class EnergySection:
    total: EnergyLine
    teams: list[EnergyLine] = field(default_factory=list)
    currency: str = ""
    note: str = ""  # how the prices came to be (the demo says its prices are examples)
    # what the week's open findings would return (each job's hours in a bucket counted once)
    recoverable_gpu_h: float = 0.0
    recoverable_kwh: float = 0.0
    recoverable_money: float | None = None
    recoverable_currency: str = ""  # what the findings priced it in (the report's own may be unset)

    @property
    def recoverable(self) -> str:
        """`Recoverable: 14.0 GPU-h, 3.2 kWh, 35.00 USD` (money only where priced)."""
        text = f"Recoverable (open findings): {self.recoverable_gpu_h:,.1f} GPU-h, "
        text += f"{self.recoverable_kwh:,.1f} kWh"
        currency = self.currency or self.recoverable_currency
        if self.recoverable_money is not None and currency:  # never a bare number as money
            text += f", {self.recoverable_money:,.2f} {currency}"
        return text + "."


def energy_section(
    con: duckdb.DuckDBPyConnection,
    jobs_meta: pd.DataFrame,
    window: Window,
    only: tuple[str, str] | None,
    prices: Prices,
    *,
    default_interval_s: float,
    max_gap_s: float,
    note: str = "",
) -> EnergySection:
    """The window's energy and money, per team; `only`: (team or user, its name): those jobs."""
    frame = job_energy(con, window, default_interval_s, max_gap_s=max_gap_s)
    frame = frame[frame["job_id"].notna()].merge(
        jobs_meta[["job_id", "team", "user"]], on="job_id", how="left"
    )
    frame["team"] = frame["team"].fillna("(no team)")
    if only is not None:
        frame = frame[frame[only[0]] == only[1]]
    frame["money"] = [
        prices.money(float(r["gpu_h"]), _opt(r["gpu_model"]), _opt(r["team"]), _opt(r["cluster"]))
        for r in frame.to_dict("records")
    ]
    lines = [_line(str(name), rows, prices) for name, rows in frame.groupby("team")]
    lines.sort(key=lambda line: (-line.kwh, line.team))
    return EnergySection(
        _line("total", frame, prices), lines, prices.currency if prices.priced else "", note
    )


def _line(name: str, rows: pd.DataFrame, prices: Prices) -> EnergyLine:
    kwh = float(rows["energy_kwh"].sum())  # NaN (no reading) counts as 0 in a sum
    money = [m for m in rows["money"] if m is not None and not pd.isna(m)]
    return EnergyLine(
        name,
        float(rows["gpu_h"].sum()),
        kwh,
        float(rows["idle_energy_kwh"].sum()),
        prices.co2e_kg(kwh),
        sum(money) if money else None,
    )


def _opt(value: object) -> str | None:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def _row(line: EnergyLine, section: EnergySection, co2e: bool) -> list[str]:
    cells = [line.team, f"{line.gpu_h:,.1f}", f"{line.kwh:,.1f}", f"{line.idle_kwh:,.1f}"]
    if co2e:
        cells.append("n/a" if line.co2e_kg is None else f"{line.co2e_kg:,.1f}")
    if section.currency:
        cells.append("n/a" if line.money is None else f"{line.money:,.2f}")
    return cells


def _header(section: EnergySection) -> list[str]:
    head = ["team", "allocated GPU-h", "kWh", "idle-allocated kWh"]
    if section.total.co2e_kg is not None:
        head.append("kg CO2e")
    if section.currency:
        head.append(f"cost ({section.currency})")
    return head


def energy_html(section: EnergySection) -> list[str]:
    co2e = section.total.co2e_kg is not None
    rows = [*section.teams, section.total]
    out = [
        "<h2>Energy and money</h2>",
        "<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in _header(section)) + "</tr>",
        *(
            "<tr>"
            + "".join(
                (f"<td>{escape(c)}</td>" if i == 0 else f"<td class='n'>{escape(c)}</td>")
                for i, c in enumerate(_row(line, section, co2e))
            )
            + "</tr>"
            for line in rows
        ),
        "</table>",
        f"<p>{escape(section.recoverable)}</p>",
    ]
    if section.note:
        out.append(f"<p class='sub'>{escape(section.note)}</p>")
    return out


def energy_markdown(section: EnergySection) -> list[str]:
    co2e = section.total.co2e_kg is not None
    head = _header(section)
    out = ["", "Energy and money:", "", "| " + " | ".join(head) + " |"]
    out.append("|---|" + "---:|" * (len(head) - 1))
    out += [
        "| " + " | ".join(_row(line, section, co2e)) + " |"
        for line in [*section.teams, section.total]
    ]
    out += ["", section.recoverable]
    if section.note:
        out += ["", section.note]
    return out
