"""The families every fleetscope process serves on its own /metrics: `process_*` and
`fleetscope_build_info`.

Prometheus's conventions (https://prometheus.io/docs/instrumenting/writing_exporters/) ask an
exporter for its process's resource use (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
`process_start_time_seconds`, ... as client libraries name them) and for a `*_build_info` gauge of
value 1 whose labels say what is running, so a dashboard can show versions across a fleet and an
alert can join on them. prometheus_client's `ProcessCollector` reads /proc; where there is none it
serves nothing.

Must never: register on prometheus_client's global REGISTRY (several servers or agents in one test
process would collide): the caller passes its own registry.
"""

from __future__ import annotations

import platform

from prometheus_client import CollectorRegistry, Gauge, ProcessCollector

from fleetscope import __version__

__all__ = ["register_process_metrics"]


def register_process_metrics(registry: CollectorRegistry, component: str) -> None:
    """Add `process_*` and `fleetscope_build_info{version, component, python_version}` (value 1)
    to `registry`; `component` names the process kind (agent, server, gateway)."""
    ProcessCollector(registry=registry)
    info = Gauge(
        "fleetscope_build_info",
        "Which fleetscope is running here (value 1): version, component and Python version.",
        ["version", "component", "python_version"],
        registry=registry,
    )
    info.labels(__version__, component, platform.python_version()).set(1)
