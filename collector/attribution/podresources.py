"""Attribution from the kubelet's pod-resources API: which pod the kubelet gave each GPU to.

The kubelet serves `v1.PodResourcesLister` over gRPC on a unix socket (setting
`agent.pod_resources_socket`, `/var/lib/kubelet/pod-resources/kubelet.sock`); `List` answers every
pod's containers with the device ids each device plugin allocated, held-but-idle GPUs included.
This is what dcgm-exporter's pod mapper reads (internal/pkg/transformation/kubernetes.go); we read
it ourselves so attribution does not depend on the exporter's Kubernetes mode being on.

Device ids, mapped to the names `base.gpu_keys` gives a reading (as dcgm-exporter maps them):

| device id | device plugin | GPU key |
|---|---|---|
| `GPU-<uuid>` | NVIDIA (default) | the GPU's UUID |
| `GPU-<uuid>::<n>` | NVIDIA, time-slicing replica n | the GPU's UUID |
| `nvidia<i>`, `nvidia<i>/vgpu<n>` | GKE, whole or shared GPU | index `i` |
| `nvidia<i>/gi<g>` | GKE, MIG GPU instance g | `i:g` |
| `MIG-<uuid>` | NVIDIA, MIG | not mapped: needs NVML's MIG-UUID lookup (dcgm-exporter labels cover it) |

Resources counted: every `nvidia.com/...` resource (`nvidia.com/gpu`, `nvidia.com/mig-*`, renamed
ones such as `nvidia.com/a100`). The job id is the pod's, as `labels.k8s_job_id` forms it, so a
training job's ranks share one id. A GPU shared by several pods (time-slicing) is attributed to
the smallest job id among them: a sample has one job (a known limit, named in docs/agent.md).

No socket (not a Kubernetes node): the source knows nothing, quietly. A failing call or an answer
that does not decode: a warning, and nothing is attributed from this source until a call works
(a stale map would name the previous pod). Must never: keep an answer older than one scrape.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from pathlib import Path

from collector.attribution.podresources_wire import ContainerDevices, decode_list_response
from fleetscope.attribution.base import gpu_keys
from fleetscope.attribution.labels import k8s_job_id
from fleetscope.normalize import GpuReading

log = logging.getLogger(__name__)

LIST_METHOD = "/v1.PodResourcesLister/List"
_GKE = re.compile(r"nvidia(\d+)(?:/gi(\d+)|/vgpu\d+)?\Z")


def gpu_key(device_id: str) -> str | None:
    """The `gpu_keys` name a device id stands for, or None when it cannot be mapped here."""
    if device_id.startswith("GPU-"):
        return device_id.split("::", 1)[0]
    gke = _GKE.match(device_id)
    if gke:
        index, instance = gke.groups()
        return index if instance is None else f"{index}:{instance}"
    return None


def job_map(groups: list[ContainerDevices]) -> dict[str, str]:
    """GPU key -> job id; several pods on one GPU: the smallest job id."""
    jobs: dict[str, str] = {}
    for group in groups:
        if not group.resource_name.startswith("nvidia.com/"):
            continue
        job = k8s_job_id(group.namespace, group.pod)
        for device_id in group.device_ids:
            key = gpu_key(device_id)
            if key is not None and (key not in jobs or job < jobs[key]):
                jobs[key] = job
    return jobs


def grpc_list(socket_path: Path, timeout_s: float) -> bytes:
    """One `List` call over the unix socket; the raw response bytes (decoded by the caller)."""
    import grpc  # agent extra; imported only where a kubelet socket exists

    with grpc.insecure_channel(f"unix://{socket_path}") as channel:
        call = channel.unary_unary(LIST_METHOD)  # no serializers: bytes in, bytes out
        answer = call(b"", timeout=timeout_s)  # ListPodResourcesRequest has no fields
    assert isinstance(answer, bytes)
    return answer


class PodResources:
    name = "pod_resources"

    def __init__(
        self,
        socket_path: Path,
        *,
        timeout_s: float = 5.0,
        list_call: Callable[[Path, float], bytes] = grpc_list,
    ) -> None:
        self.socket_path = socket_path
        self.timeout_s = timeout_s
        self._list_call = list_call
        self._jobs: dict[str, str] = {}
        self._last_error = ""

    def refresh(self) -> None:
        self._jobs = {}
        if not self.socket_path.exists():
            return
        try:
            self._jobs = job_map(
                decode_list_response(self._list_call(self.socket_path, self.timeout_s))
            )
        except Exception as exc:  # grpc.RpcError, ValueError (corrupt answer), ImportError, OSError
            error = f"{type(exc).__name__}: {exc}"
            if error != self._last_error:  # once per distinct failure, not every scrape
                log.warning(
                    "pod-resources %s: %s; pods not attributed from it", self.socket_path, error
                )
            self._last_error = error
            return
        self._last_error = ""

    def job_for(self, reading: GpuReading) -> str | None:
        if not self._jobs:  # nothing to match: skip building the reading's keys (per GPU per tick)
            return None
        for key in gpu_keys(reading):
            job = self._jobs.get(key)
            if job:
                return job
        return None
