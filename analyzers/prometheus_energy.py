"""The recoverable energy and money of open findings as Prometheus families, beside
`fleetscope_recoverable_gpu_seconds` (analyzers.prometheus_export, which yields these):

| family | type | labels | what |
|---|---|---|---|
| `fleetscope_recoverable_energy_joules` | gauge | those of the GPU-hours family | the same findings' recoverable energy (evidence `recoverable_kwh`, in the base unit) |
| `fleetscope_recoverable_money` | gauge | those, plus currency | their recoverable money, only findings with a price set (`cost.*`) |
| `fleetscope_allocated_gpu_energy_joules_total` | counter | cluster | energy of allocated GPUs (analyzers.accounting.energy), over the GPU-hour counters' ranges |
| `fleetscope_idle_allocated_gpu_energy_joules_total` | counter | cluster | the part of it at 0 % utilization |

The same series as the GPU-hours family (the same top jobs, the rest in the same "other"), so
one can be divided by the other. Money has no base unit in Prometheus's conventions; its unit is
the `currency` label (the setting `cost.currency`). A finding without the figure adds nothing.
Pure: the export's refresh calls it on the findings it read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from analyzers.findings import Finding

J_PER_KWH: Final = 3.6e6
Key = tuple[str, ...]


def evidence_series(
    findings: Sequence[Finding], key_of: Callable[[Finding], Key]
) -> tuple[dict[Key, float], dict[Key, float]]:
    """(joules, money) per series key of the GPU-hours family; money's key ends in currency."""
    joules: dict[Key, float] = defaultdict(float)
    money: dict[Key, float] = defaultdict(float)
    for f in findings:
        kwh, cost = f.evidence.get("recoverable_kwh"), f.evidence.get("recoverable_money")
        if isinstance(kwh, int | float):
            joules[key_of(f)] += float(kwh) * J_PER_KWH
        if isinstance(cost, int | float):
            money[(*key_of(f), str(f.evidence.get("currency", "")))] += float(cost)
    return dict(joules), dict(money)


def families(
    joules: dict[Key, float], money: dict[Key, float], labels: Sequence[str]
) -> Iterator[GaugeMetricFamily]:
    energy = GaugeMetricFamily(
        "fleetscope_recoverable_energy_joules",
        "Energy the GPU-hours of fleetscope_recoverable_gpu_seconds drew (the jobs' own mean draw).",
        labels=list(labels),
    )
    for key, value in sorted(joules.items()):
        energy.add_metric(list(key), round(value, 3))
    yield energy
    priced = GaugeMetricFamily(
        "fleetscope_recoverable_money",
        "Money of the same GPU-hours at the prices set (cost.*), in the currency label's unit.",
        labels=[*labels, "currency"],
    )
    for key, value in sorted(money.items()):
        priced.add_metric(list(key), round(value, 2))
    yield priced


def energy_counters(
    allocated_j: dict[str, float], idle_j: dict[str, float]
) -> Iterator[CounterMetricFamily]:
    for name, per_cluster, text in (
        ("fleetscope_allocated_gpu_energy_joules", allocated_j, "Energy of allocated GPUs"),
        (
            "fleetscope_idle_allocated_gpu_energy_joules",
            idle_j,
            "Energy of allocated GPUs at 0 % utilization",
        ),
    ):
        family = CounterMetricFamily(
            name, f"{text} since the warehouse's first sample.", labels=["cluster"]
        )
        for cluster, joules in sorted(per_cluster.items()):
            family.add_metric([cluster], round(joules, 3))
        yield family


def energy_totals(
    con: Any, window: Any, default_interval_s: float, max_gap_s: float, totals: Any
) -> None:
    """The allocated and idle-allocated energy of [window) per cluster onto `totals`' counters
    (analyzers.accounting.energy: raw samples; a job's sample at a refresh boundary is power
    integrated, its counter delta to the next refresh's first sample not being read)."""
    from analyzers.accounting.energy import job_energy

    frame = job_energy(con, window, default_interval_s, max_gap_s=max_gap_s)
    frame = frame[frame["job_id"].notna()]
    for cluster, group in frame.groupby(frame["cluster"].fillna("")):
        totals.energy_j[str(cluster)] += float(group["energy_kwh"].sum()) * J_PER_KWH
        totals.idle_energy_j[str(cluster)] += float(group["idle_energy_kwh"].sum()) * J_PER_KWH
