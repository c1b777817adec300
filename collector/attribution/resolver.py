"""The attribution resolver: asks each source in a fixed precedence and records who answered.

Precedence, most trusted first (the first source that names a job wins, and its name goes to the
`attribution` column):

    1. override      explicit file an operator wrote          (override.py)
    2. mapping_dir   Slurm prolog's per-GPU job files          (mapping_dir.py)
    3. pod_resources the kubelet's pod-resources API           (podresources.py)
    4. hpc_job, k8s  dcgm-exporter's own labels                (labels.py)
    5. proc          SLURM_JOB_ID of processes on the GPU      (proc_environ.py)

Why this order: the operator's word beats everything; the scheduler's allocation record (mapping
files written at allocation time, the kubelet's device allocations) beats labels the exporter
copied from it (same facts, one hop later); processes come last because they only exist while something runs, which is exactly what
a held-but-idle allocation lacks.

Must never: change a row's measurements.
"""

from __future__ import annotations

from collections.abc import Callable

from collector.attribution.mapping_dir import MappingDir
from collector.attribution.override import OverrideFile
from collector.attribution.podresources import PodResources
from collector.attribution.proc_environ import ProcEnviron
from fleetscope.attribution.base import AttributionSource
from fleetscope.attribution.labels import HpcJobLabel, PodLabels
from fleetscope.attribution.resolver import AttributionResolver
from fleetscope.settings import Settings


def build_resolver(
    settings: Settings, *, pid_gpus: Callable[[], dict[int, list[str]]] | None = None
) -> AttributionResolver:
    """The resolver for these settings: sources whose folder or file is configured, in order."""
    sources: list[AttributionSource] = []
    override = settings.agent.attribution_override
    if override:
        sources.append(OverrideFile(settings.path(settings.agent.attribution_override)))
    if settings.agent.job_mapping_dir:
        sources.append(MappingDir(settings.path(settings.agent.job_mapping_dir)))
    if settings.agent.pod_resources_socket:
        sources.append(PodResources(settings.path(settings.agent.pod_resources_socket)))
    sources += [HpcJobLabel(), PodLabels()]
    if settings.agent.proc_root:
        sources.append(ProcEnviron(settings.path(settings.agent.proc_root), pid_gpus=pid_gpus))
    return AttributionResolver(sources)
