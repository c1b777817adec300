"""dcgm-exporter samples -> one gpu_samples row per GPU (or MIG instance) per scrape.

What it is for: reading every label variant dcgm-exporter has printed (`Hostname`/`hostname`,
`UUID`/`uuid`, `container/namespace/pod` and the pre-2.0 `container_name/pod_namespace/pod_name`,
MIG `GPU_I_PROFILE`/`GPU_I_ID`) into the canonical columns of fleetscope.contract.GPU_SAMPLES.
Known fields land in their column through dcgm_fields.FIELDS; unknown DCGM fields go to `extra`
under their exporter name; DCGM blank sentinels become nulls (or are left out of `extra`).

MIG: DCGM has no GPU_UTIL for a MIG instance; dcgm-exporter's MIG documentation points to
GR_ENGINE_ACTIVE instead, so a MIG row without gpu_util gets `gpu_util = 100 * gr_engine_active`.

Must never: decide which job owns a GPU (attribution/ does that), talk to the network, or drop a
field it does not know.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from fleetscope.contract import GPU_SAMPLES
from fleetscope.dcgm_fields import FIELDS, is_blank
from fleetscope.exposition import Sample

__all__ = ["GpuReading", "finish_readings", "new_reading", "normalize_samples", "series_key"]

_EMPTY_ROW: dict[str, object] = dict.fromkeys(GPU_SAMPLES.names)

# Label spellings, newest first; the first non-empty one wins.
_UUID_LABELS = ("UUID", "uuid")
_HOST_LABELS = ("Hostname", "hostname")
_POD_LABELS = ("pod", "pod_name")
_NAMESPACE_LABELS = ("namespace", "pod_namespace")
_CONTAINER_LABELS = ("container", "container_name")


def _first(labels: dict[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return value
    return None


@dataclass
class GpuReading:
    """One GPU (or MIG instance) in one scrape: its gpu_samples row and its identifying labels.

    `labels` keeps what attribution sources read (pod, namespace, hpc_job...); `row` holds only
    contract columns, so it can go straight into an Arrow table.
    """

    row: dict[str, object]
    labels: dict[str, str]
    extra: dict[str, float] = field(default_factory=dict)


def new_reading(
    labels: dict[str, str], *, ts_ms: int, cluster: str, host: str | None
) -> GpuReading:
    """The reading of one GPU from the labels of its first sample on the page."""
    mig_id = labels.get("GPU_I_ID")
    row: dict[str, object] = dict(_EMPTY_ROW)  # every column, in contract order (fast sealing)
    row |= {
        "ts": ts_ms,
        "cluster": cluster,
        "host": host or _first(labels, _HOST_LABELS) or "",
        "gpu_index": int(labels["gpu"]),
        "gpu_uuid": _first(labels, _UUID_LABELS),
        "gpu_model": labels.get("modelName") or None,
        "mig_profile": labels.get("GPU_I_PROFILE") or None,
        "mig_instance_id": int(mig_id) if mig_id else None,
        "job_id": None,
        "attribution": None,
        "pod": _first(labels, _POD_LABELS),
        "namespace": _first(labels, _NAMESPACE_LABELS),
        "container": _first(labels, _CONTAINER_LABELS),
    }
    return GpuReading(row=row, labels=labels)


def series_key(sample: Sample) -> tuple[str, str] | None:
    """(gpu, GPU_I_ID) of a per-GPU DCGM sample; None for anything else (other exporters'
    series, or DCGM gauges without a numeric `gpu` label such as DCGM_FI_DEV_COUNT)."""
    if not sample.name.startswith("DCGM_FI_"):
        return None
    gpu = sample.labels.get("gpu")
    if gpu is None or not (gpu.isascii() and gpu.isdigit()):  # '²' passes isdigit() alone
        return None
    return (gpu, sample.labels.get("GPU_I_ID", ""))


def finish_readings(readings: dict[tuple[str, str], GpuReading]) -> list[GpuReading]:
    """The page-level steps after every sample is placed: MIG gpu_util, `extra` (None if empty)."""
    for reading in readings.values():
        row = reading.row
        if row["mig_instance_id"] is not None and row.get("gpu_util") is None:
            active = row.get("gr_engine_active")
            if isinstance(active, float):
                row["gpu_util"] = active * 100.0
        row["extra"] = reading.extra or None
    return list(readings.values())


def normalize_samples(
    samples: Iterable[Sample], *, ts_ms: int, cluster: str, host: str | None = None
) -> list[GpuReading]:
    """Group DCGM samples by (gpu, GPU_I_ID); one reading each, in order of first appearance.

    `ts_ms` is the scrape time, used unless the exporter stamped its samples; `host` overrides the
    exporter's Hostname label (which is the exporter pod's name on Kubernetes unless NODE_NAME is
    set, so the agent prefers its own setting). collector.dcgm_scan gives the same readings
    straight from the page text, faster; this is the reference it is tested against.
    """
    readings: dict[tuple[str, str], GpuReading] = {}
    fields = FIELDS
    for sample in samples:
        key = series_key(sample)
        if key is None:
            continue
        reading = readings.get(key)
        if reading is None:
            reading = readings[key] = new_reading(
                sample.labels, ts_ms=ts_ms, cluster=cluster, host=host
            )
            if sample.timestamp is not None:
                reading.row["ts"] = round(sample.timestamp * 1000)
        value = float(sample.value)
        if is_blank(value):
            continue
        spec = fields.get(sample.name)
        if spec is None:
            reading.extra[sample.name] = value
        else:
            reading.row[spec.column] = value * spec.scale
    return finish_readings(readings)
