"""Attribution from dcgm-exporter's own labels: Slurm `hpc_job`, Kubernetes `pod`/`namespace`.

Job id convention (shared with the simulator): Slurm jobs are the `hpc_job` value; a Kubernetes
job is "<namespace>/<pod name>" with a trailing replica suffix removed: `-master-<n>`,
`-worker-<n>`, `-launcher-<n>` (Kubeflow's PyTorchJob / MPIJob pod names) or a bare `-<n>`
(StatefulSet and JobSet ordinals), so all ranks of one training job share one id.

Must never: read anything but the labels already on the reading.
"""

from __future__ import annotations

import re

from fleetscope.normalize import GpuReading

_REPLICA_SUFFIX = re.compile(r"(?:-(?:master|worker|launcher))?-\d+\Z")


def k8s_job_id(namespace: str, pod: str) -> str:
    """'ml/llama-ft-worker-3' -> 'ml/llama-ft'; 'ml/web-0' -> 'ml/web'."""
    return f"{namespace}/{_REPLICA_SUFFIX.sub('', pod) or pod}"


class HpcJobLabel:
    name = "hpc_job"

    def refresh(self) -> None:
        pass

    def job_for(self, reading: GpuReading) -> str | None:
        return reading.labels.get("hpc_job") or None


class PodLabels:
    name = "k8s"

    def refresh(self) -> None:
        pass

    def job_for(self, reading: GpuReading) -> str | None:
        pod = reading.row.get("pod")
        namespace = reading.row.get("namespace")
        if isinstance(pod, str) and pod:
            return k8s_job_id(namespace if isinstance(namespace, str) else "", pod)
        return None
