"""Prometheus series of dcgm-exporter metrics -> gpu_samples rows, exactly as an agent makes them.

What it is for: the one conversion shared by remote_write (warehouse/prometheus/remote_write.py) and the
HTTP-API backfill (warehouse/prometheus/importer.py). A *scrape* is identified by (cluster, host,
timestamp): every sample Prometheus took from one dcgm-exporter page carries the page's scrape
timestamp, so grouping by it rebuilds the page. Each scrape's samples then go through the
collector's own `normalize_samples` (same columns, units, blank sentinels, MIG rule, `extra`) and
the label-based attribution sources an agent uses (`hpc_job`, Kubernetes `pod`/`namespace`);
host-local sources (override file, Slurm mapping folder, /proc) do not exist on the server.

Labels Prometheus adds or renames:
- host: the exporter's `Hostname`/`hostname` label, else the target's `instance` without its port;
- cluster: a `cluster` label (usually from `external_labels`), else `server.prometheus_cluster`;
- `exported_pod`, `exported_namespace`, `exported_container`, `exported_Hostname`...: Prometheus
  renames an exporter label that clashes with a target label (`honor_labels: false`); the
  exporter's original value is the one that names the job's pod, so it wins back its name.

Must never: talk to the network or the writer, or decide anything an agent would decide
differently.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final

import pyarrow as pa

from fleetscope.attribution.labels import HpcJobLabel, PodLabels
from fleetscope.attribution.resolver import AttributionResolver
from fleetscope.contract import GPU_SAMPLES
from fleetscope.errors import ContractError
from fleetscope.exposition import Sample
from fleetscope.normalize import normalize_samples

__all__ = [
    "DCGM_PREFIX",
    "ScrapeKey",
    "exporter_labels",
    "rows_for_scrape",
    "rows_to_table",
    "scrape_of",
]

DCGM_PREFIX: Final = "DCGM_FI_"
_HOST_LABELS: Final = ("Hostname", "hostname")
_EXPORTED: Final = "exported_"

ScrapeKey = tuple[str, str]  # (cluster, host): one dcgm-exporter target


def exporter_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """The labels the exporter wrote: `__name__` dropped, `exported_<x>` restored as `<x>`."""
    out = {k: v for k, v in labels.items() if k != "__name__" and not k.startswith(_EXPORTED)}
    for name, value in labels.items():
        if name.startswith(_EXPORTED) and value:
            out[name.removeprefix(_EXPORTED)] = value
    return out


def _host(labels: Mapping[str, str]) -> str:
    for name in _HOST_LABELS:
        if labels.get(name):
            return labels[name]
    instance = labels.get("instance", "")
    host, sep, port = instance.rpartition(":")
    if sep and port.isascii() and port.isdigit():
        instance = host.removeprefix("[").removesuffix("]")  # [::1]:9400 -> ::1
    return instance


def scrape_of(
    labels: Mapping[str, str],
    default_cluster: str,
    known_cluster: Callable[[str], str | None] | None = None,
) -> ScrapeKey | None:
    """The (cluster, host) target of a per-GPU DCGM series; None for any other series.

    Without a `cluster` label, the cluster the catalog already knows the host by (an agent's
    `agent.cluster`), so the same host lands in the same cluster whatever path it came by; a
    host never seen takes `default_cluster`.

    `labels` are the exporter's (see `exporter_labels`). Not per-GPU: a series without a numeric
    `gpu` label (normalize skips those too) or one that is not a DCGM field at all.
    """
    gpu = labels.get("gpu")
    if gpu is None or not (gpu.isascii() and gpu.isdigit()):  # '²' is a digit to isdigit()
        return None
    host = _host(labels)
    cluster = labels.get("cluster") or (known_cluster(host) if known_cluster else None)
    return (cluster or default_cluster, host)


_RESOLVER: Final = AttributionResolver([HpcJobLabel(), PodLabels()])


def rows_for_scrape(
    key: ScrapeKey, ts_ms: int, samples: Iterable[Sample]
) -> list[dict[str, object]]:
    """One scrape's samples -> one attributed gpu_samples row per GPU or MIG instance."""
    cluster, host = key
    readings = normalize_samples(samples, ts_ms=ts_ms, cluster=cluster, host=host)
    _RESOLVER.resolve(readings)
    return [reading.row for reading in readings]


def rows_to_table(rows: list[dict[str, object]]) -> pa.Table:
    """Rows keyed by contract column (missing keys are nulls) -> a table in GPU_SAMPLES."""
    columns = {f.name: [row.get(f.name) for row in rows] for f in GPU_SAMPLES}
    columns["extra"] = [
        list(extra.items()) if isinstance(extra, dict) else None for extra in columns["extra"]
    ]
    try:
        return pa.Table.from_pydict(columns, schema=GPU_SAMPLES)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ContractError(f"gpu_samples: rows do not fit the contract: {exc}") from exc
