"""Settings rows of energy and money (part of the one table): none has an invented default. With
no prices set, no view shows money; with no grid intensity set, none shows CO2e."""

from __future__ import annotations

from fleetscope.settings.setting import Setting

ROWS: tuple[Setting, ...] = (
    # -- energy and money ---------------------------------------------------------------------
    Setting(
        "cost.currency",
        "",
        "str",
        "Currency of every price below (ISO 4217, e.g. USD); required once a price is set.",
    ),
    Setting(
        "cost.gpu_hour_prices",
        "",
        "str",
        "Price of one GPU-hour per GPU model, comma-separated MODEL=PRICE (the exporter's "
        "modelName, e.g. NVIDIA H100 80GB HBM3=2.50); empty: no money shown.",
    ),
    Setting(
        "cost.team_gpu_hour_prices",
        "",
        "str",
        "Price of one GPU-hour per team, comma-separated TEAM=PRICE; a team's price wins over "
        "its cluster's and its GPU model's.",
    ),
    Setting(
        "cost.cluster_gpu_hour_prices",
        "",
        "str",
        "Price of one GPU-hour per cluster, comma-separated CLUSTER=PRICE; wins over the GPU "
        "model's.",
    ),
    Setting(
        "cost.prices_note",
        "",
        "str",
        "One line shown under money figures saying where the prices come from (the demo says "
        "its prices are examples).",
    ),
    Setting(
        "cost.grid_gco2e_per_kwh",
        "",
        "str",
        "Grid carbon intensity in grams CO2e per kWh (your utility's or a grid operator's figure); "
        "empty: no CO2e shown.",
    ),
)
