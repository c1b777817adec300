"""dcgm-exporter `/metrics` pages, byte for byte in the exporter's text format.

What it is for: turning one host's values at one second into the page dcgm-exporter would serve.
The layout is dcgm-exporter's Go template (internal/pkg/rendermetrics): per metric family a
`# HELP` and `# TYPE` line, then one line per GPU (or MIG instance) with labels in the order
gpu, UUID, pci_bus_id, device, modelName, [GPU_I_PROFILE, GPU_I_ID], Hostname, then the sorted
label fields (DCGM_FI_DRIVER_VERSION) and the pod or job labels; no blank lines, one final
newline. A family with no value on any GPU is left out entirely, as the exporter does.

Variants (VARIANTS) differ only in the host label and the job labels:
- "release": `Hostname`, and `container`, `namespace`, `pod` (empty strings when no pod holds
  the GPU), as tests/data/dcgm/h100_k8s_release.prom and a100_mig.prom show;
- "slurm": lower-case `hostname` (dcgm-exporter's 2026 rename) and `hpc_job` only while a job
  holds the GPU, as tests/data/dcgm/h100_slurm_main.prom shows.

Must never: compute values (signals.py) or touch the network.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from simulator.fields import EXPORTER_FIELDS
from simulator.fleet import Fleet, Host, Unit
from simulator.hardware import DRIVER_VERSION
from simulator.signals import Frame

__all__ = ["CONTENT_TYPE", "VARIANTS", "Variant", "render_page"]

# What dcgm-exporter (prometheus/common expfmt, text format 0.0.4) answers with.
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Allocation:
    """Who holds one GPU at the rendered second, as the exporter's labels show it."""

    job_id: str | None
    pod: str | None
    namespace: str | None


@dataclass(frozen=True)
class Variant:
    host_label: str
    job_labels: Callable[[Allocation], str]


def _k8s_labels(alloc: Allocation) -> str:
    container = "trainer" if alloc.pod else ""
    return f',container="{container}",namespace="{alloc.namespace or ""}",pod="{alloc.pod or ""}"'


def _slurm_labels(alloc: Allocation) -> str:
    return f',hpc_job="{alloc.job_id}"' if alloc.job_id else ""


VARIANTS: Final[dict[str, Variant]] = {
    "release": Variant("Hostname", _k8s_labels),
    "slurm": Variant("hostname", _slurm_labels),
}


def static_labels(host: Host, unit: Unit) -> str:
    """The labels that never change for a unit, up to and including the driver version."""
    variant = VARIANTS[host.variant]
    mig = (
        f',GPU_I_PROFILE="{unit.mig_profile}",GPU_I_ID="{unit.mig_instance_id}"'
        if unit.mig_profile
        else ""
    )
    return (
        f'gpu="{unit.gpu_index}",UUID="{unit.uuid}",pci_bus_id="{unit.pci_bus_id}",'
        f'device="nvidia{unit.gpu_index}",modelName="{host.model.model_name}"{mig},'
        f'{variant.host_label}="{host.name}",DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"'
    )


def allocations(fleet: Fleet, frame: Frame, seg_pod: list[str | None]) -> list[Allocation]:
    out: list[Allocation] = []
    for seg, job in zip(frame.seg.tolist(), frame.job.tolist(), strict=True):
        if job < 0:
            out.append(Allocation(None, None, None))
            continue
        record = fleet.jobs[job]
        namespace = record.team if record.scheduler == "k8s" else None
        out.append(Allocation(record.job_id, seg_pod[seg], namespace))
    return out


def _format(value: float, kind: str) -> str:
    return str(int(value)) if kind == "int" else f"{value:f}"


def render_page(host: Host, units: list[Unit], frame: Frame, allocs: list[Allocation]) -> str:
    """The page for `units` of `host`, whose values are `frame` (one element per unit)."""
    variant = VARIANTS[host.variant]
    prefixes = [
        "{" + static_labels(host, unit) + variant.job_labels(alloc) + "} "
        for unit, alloc in zip(units, allocs, strict=True)
    ]
    lines: list[str] = []
    for field in EXPORTER_FIELDS:
        column = frame.values[field.key].tolist()
        body = [
            field.name + prefix + _format(value, field.kind)
            for prefix, value in zip(prefixes, column, strict=True)
            if not math.isnan(value)
        ]
        if body:
            lines.append(f"# HELP {field.name} {field.help}")
            lines.append(f"# TYPE {field.name} {field.prom_type}")
            lines.extend(body)
    return "\n".join(lines) + "\n"
