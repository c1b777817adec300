"""Recoverable kWh and money beside every finding's recoverable GPU-hours
(analyzers.accounting.recoverable), landed by the pipeline: kWh from the job's own draw, money
only where a price is set, at the team's price before the GPU model's."""

from __future__ import annotations

from datetime import timedelta

import pytest

from analyzers.accounting.cost import Prices, parse_prices
from analyzers.base import JobInfo, StaticJobCatalog
from analyzers.run.runner import Pipeline
from analyzers.run.window import Window
from fleetscope.errors import ConfigError
from fleetscope.settings import load_settings
from simulator.maker.series import T0, Fleet

H100 = "NVIDIA H100 80GB HBM3"
IDLE_W = 70.0  # an idle H100's draw
MINUTES = 120


def idle_fleet() -> Fleet:
    """Job `idle` holds 2 GPUs for 2 h at 0 %, drawing 70 W each, its energy counter (mJ since
    the driver loaded) rising accordingly."""
    counter = lambda i, t: {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 5e9 + IDLE_W * t * 1000}  # noqa: E731
    return Fleet().gpus(
        "idle", "h1", range(2), 0, MINUTES, interval_s=30.0, gpu_util=0.0,
        gr_engine_active=0.0, sm_active=0.0, tensor_active=0.0, power_w=IDLE_W, extra=counter,
    )  # fmt: skip


def run(prices: Prices) -> dict[str, object]:
    catalog = StaticJobCatalog([JobInfo("idle", user="ada", team="vision")])
    pipeline = Pipeline.default()
    pipeline = Pipeline(pipeline.analyzers, pipeline.params, prices=prices)
    window = Window(T0, T0 + timedelta(hours=3))
    result = pipeline.run(idle_fleet().connect(), window, catalog)
    (r1,) = [f for f in result.findings if f.rule_id == "R1"]
    return {"hours": r1.wasted_gpu_hours, **r1.evidence}


def test_a_finding_carries_the_kwh_its_hours_drew_and_no_money_without_prices() -> None:
    found = run(Prices())
    assert found["hours"] == pytest.approx(4.0)
    assert found["recoverable_kwh"] == pytest.approx(4.0 * IDLE_W / 1000, abs=1e-4)
    assert "recoverable_money" not in found and "currency" not in found


def test_money_where_prices_are_set_the_teams_before_the_models() -> None:
    by_model = run(Prices("USD", by_model={H100.casefold(): 2.5}))
    assert (by_model["recoverable_money"], by_model["currency"]) == (10.0, "USD")
    by_team = run(Prices("EUR", by_model={H100.casefold(): 2.5}, by_team={"vision": 1.25}))
    assert (by_team["recoverable_money"], by_team["currency"]) == (5.0, "EUR")
    other_model = run(Prices("USD", by_model={"nvidia a100 80gb pcie": 1.0}))
    assert "recoverable_money" not in other_model


def test_prices_come_from_settings_and_bad_ones_are_named() -> None:
    settings = load_settings(env={}).with_overrides(
        cost__gpu_hour_prices=f"{H100}=2.5, NVIDIA A100 80GB PCIe=1.1",
        cost__team_gpu_hour_prices="vision=3",
        cost__currency="USD",
        cost__grid_gco2e_per_kwh="400",
    )
    prices = Prices.from_settings(settings)
    assert prices.gpu_hour_price(H100) == 2.5
    assert prices.gpu_hour_price(H100, team="vision") == 3.0
    assert prices.gpu_hour_price("NVIDIA B200") is None
    assert prices.co2e_kg(10.0) == 4.0
    assert Prices.from_settings(load_settings(env={})) == Prices()  # nothing invented
    assert Prices().co2e_kg(10.0) is None
    with pytest.raises(ConfigError, match=r"cost\.currency"):
        Prices.from_settings(settings.with_overrides(cost__currency=""))
    with pytest.raises(ConfigError, match=r"cost\.gpu_hour_prices: 'H100=cheap'"):
        parse_prices("H100=cheap", "cost.gpu_hour_prices")


def test_opportunities_sum_kwh_and_money_counting_each_jobs_hours_once() -> None:
    """An idle job is R1 and R3 for the same hours: its kWh and money count once, as its hours
    do; money only from the findings a price applied to."""
    from analyzers.findings import Finding
    from analyzers.reports.ranking import rank, render

    def found(rule: str, job: str, hours: float, **evidence: object) -> Finding:
        return Finding(
            rule_id=rule, severity="warn", job_id=job, host="h1", gpus=("0",), window_start=T0,
            window_end=T0 + timedelta(hours=1), title=rule, recommendation="-",
            wasted_gpu_hours=hours, estimate_method="-", evidence=evidence,
        )  # fmt: skip

    priced = {"recoverable_kwh": 0.28, "recoverable_money": 10.0, "currency": "USD"}
    report = rank(
        [
            found("R1", "idle", 4.0, **priced),
            found("R3", "idle", 4.0, **priced),
            found("R2", "low", 2.0, recoverable_kwh=0.9),  # a GPU model without a price
        ]
    )
    assert (report.total_gpu_hours, report.total_kwh) == (6.0, pytest.approx(1.18))
    assert (report.total_money, report.currency) == (10.0, "USD")
    text = render(report, "7d")
    assert "Recoverable energy: 1.2 kWh; money: 10.00 USD (where prices are set)" in text
    assert "R2            2.0         1      1       0.9        n/a" in text
    assert "money" not in render(rank([found("R2", "low", 2.0)]), "7d")  # no price set
