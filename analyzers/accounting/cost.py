"""Money and CO2e: what a GPU-hour costs and what a kWh emits, from settings with no invented
defaults (fleetscope/settings/rows_cost.py).

A GPU-hour's price is the job's team's (`cost.team_gpu_hour_prices`), else its cluster's
(`cost.cluster_gpu_hour_prices`), else its GPU model's (`cost.gpu_hour_prices`), else unknown:
a view shows money only where a price applies, never a zero. Prices are per GPU-hour because
that is how clouds and internal chargeback bill GPUs (the energy is in the price). CO2e is kWh
times `cost.grid_gco2e_per_kwh` (grams per kWh), shown only when that is set.

Pure: no I/O, no queries.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fleetscope.errors import ConfigError

if TYPE_CHECKING:
    from fleetscope.settings import Settings


def parse_prices(text: str, key: str) -> dict[str, float]:
    """`NAME=PRICE, NAME=PRICE` as a dict; a malformed or negative entry is a ConfigError that
    names the setting."""
    out: dict[str, float] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, sep, value = item.rpartition("=")
        try:
            price = float(value)
        except ValueError:
            price = math.nan
        if not sep or not name.strip() or not math.isfinite(price) or price < 0:
            raise ConfigError(f"{key}: {item!r} is not NAME=PRICE with a price of 0 or more")
        out[name.strip().casefold()] = price
    return out


@dataclass(frozen=True)
class Prices:
    """The deployment's prices; empty mappings and None where nothing is set."""

    currency: str = ""
    by_model: Mapping[str, float] = field(default_factory=dict)
    by_team: Mapping[str, float] = field(default_factory=dict)
    by_cluster: Mapping[str, float] = field(default_factory=dict)
    grid_gco2e_per_kwh: float | None = None
    note: str = ""  # where the prices come from, shown under money (the demo: examples)

    @classmethod
    def from_settings(cls, settings: Settings) -> Prices:
        cost = settings.cost
        prices = cls(
            currency=cost.currency.strip(),
            by_model=parse_prices(cost.gpu_hour_prices, "cost.gpu_hour_prices"),
            by_team=parse_prices(cost.team_gpu_hour_prices, "cost.team_gpu_hour_prices"),
            by_cluster=parse_prices(cost.cluster_gpu_hour_prices, "cost.cluster_gpu_hour_prices"),
            grid_gco2e_per_kwh=_intensity(cost.grid_gco2e_per_kwh),
            note=cost.prices_note.strip(),
        )
        if prices.priced and not prices.currency:
            raise ConfigError("cost.currency: set it (e.g. USD) when any GPU-hour price is set")
        return prices

    @property
    def priced(self) -> bool:
        """Whether any GPU-hour price is set (else no view shows money)."""
        return bool(self.by_model or self.by_team or self.by_cluster)

    def gpu_hour_price(
        self, model: str | None, team: str | None = None, cluster: str | None = None
    ) -> float | None:
        """The price of one of this job's GPU-hours: team, else cluster, else model; None: none set."""
        for table, name in (
            (self.by_team, team),
            (self.by_cluster, cluster),
            (self.by_model, model),
        ):
            if name and name.casefold() in table:
                return table[name.casefold()]
        return None

    def money(
        self,
        gpu_hours: float,
        model: str | None,
        team: str | None = None,
        cluster: str | None = None,
    ) -> float | None:
        """`gpu_hours` priced for this job, None where no price applies."""
        price = self.gpu_hour_price(model, team, cluster)
        return None if price is None else gpu_hours * price

    def co2e_kg(self, kwh: float) -> float | None:
        """kWh as kg CO2e at the grid intensity set, None without one."""
        if self.grid_gco2e_per_kwh is None or not math.isfinite(kwh):
            return None
        return kwh * self.grid_gco2e_per_kwh / 1000.0


def _intensity(text: str) -> float | None:
    if not text.strip():
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"cost.grid_gco2e_per_kwh: {text!r} is not grams CO2e per kWh (>= 0)")
    return value
