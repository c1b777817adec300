"""Pod-to-GPU attribution through the kubelet's pod-resources API, against a real gRPC server on a
unix socket speaking `v1.PodResourcesLister` (the .proto from the Kubernetes source, compiled here
with grpcio-tools; messages encoded by protobuf itself from the recorded answers in
tests/data/podresources/). The agent's side is the real one: grpcio over the socket and the
hand decoder, through the resolver built from settings.

Specification:
- every GPU the kubelet gave a pod is attributed to that pod's job (ranks of one job share it),
  idle or busy; device ids of the NVIDIA and GKE device plugins map as dcgm-exporter maps them;
  MIG UUIDs are not mapped (no NVML here) and non-NVIDIA devices are ignored.
- no socket: nothing attributed, no error; a server that fails or answers garbage: nothing
  attributed from it, the agent keeps going.
- the decoder reads what protobuf writes, for any message (property test).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import sys
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from types import ModuleType
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from collector.attribution import build_resolver
from collector.attribution.podresources import PodResources, gpu_key
from collector.attribution.podresources_wire import ContainerDevices, decode_list_response
from fleetscope.settings import load_settings
from tests.collector.test_attribution import attributed, readings_of

DATA = Path(__file__).resolve().parents[1] / "data" / "podresources"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """api_pb2 compiled from the Kubernetes .proto by protoc (grpcio-tools)."""
    from grpc_tools import protoc

    out = tmp_path_factory.mktemp("podresources_pb")
    code = protoc.main(["protoc", f"-I{DATA}", f"--python_out={out}", str(DATA / "api.proto")])
    assert code == 0
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("api_pb2")
    finally:
        sys.path.remove(str(out))
        sys.modules.pop("api_pb2", None)


def recorded(api: ModuleType, name: str) -> Any:
    answer = json.loads((DATA / name).read_text())
    answer.pop("_source")
    return json_format.ParseDict(answer, api.ListPodResourcesResponse())


Handler = Callable[[Any, grpc.ServicerContext], Any]


@pytest.fixture
def kubelet(tmp_path: Path, api: ModuleType) -> Iterator[Callable[[Handler], Path]]:
    """Start a gRPC server serving `List` with the given handler on a unix socket; its path."""
    servers: list[grpc.Server] = []

    def start(handler: Handler) -> Path:
        socket_path = tmp_path / "pod-resources" / "kubelet.sock"
        socket_path.parent.mkdir(exist_ok=True)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        method = grpc.unary_unary_rpc_method_handler(
            handler,
            request_deserializer=api.ListPodResourcesRequest.FromString,
            response_serializer=lambda m: m if isinstance(m, bytes) else m.SerializeToString(),
        )
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler("v1.PodResourcesLister", {"List": method}),)
        )
        server.add_insecure_port(f"unix://{socket_path}")
        server.start()
        servers.append(server)
        return socket_path

    yield start
    for server in servers:
        server.stop(grace=None)


def resolver_for(socket_path: Path) -> Any:
    settings_ = load_settings(env={}).with_overrides(
        agent__pod_resources_socket=str(socket_path), agent__proc_root=""
    )
    return build_resolver(settings_)


NODE_PAGE = "".join(  # dcgm-exporter's power line for 8 GPUs, without any pod labels
    f'DCGM_FI_DEV_POWER_USAGE{{gpu="{i}",UUID="{uuid}",Hostname="gpu-node-7"}} 80.5\n'
    for i, uuid in enumerate(
        [
            "GPU-b8ea3855-276c-c9cb-b366-c6fa655957c5",
            "GPU-2f8b7c3e-5d1a-4e9b-8c7d-1a2b3c4d5e6f",
            "GPU-9e1d2c3b-4a5f-6e7d-8c9b-0a1b2c3d4e5f",
            "GPU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d",
            "GPU-5c6d7e8f-9a0b-1c2d-3e4f-5a6b7c8d9e0f",
            "GPU-6d7e8f9a-0b1c-2d3e-4f5a-6b7c8d9e0f1a",
            "GPU-7e8f9a0b-1c2d-3e4f-5a6b-7c8d9e0f1a2b",
            "GPU-ffffffff-0000-1111-2222-333333333333",  # free: no pod holds it
        ]
    )
)


def test_gpu_operator_node_every_allocated_gpu_gets_its_pods_job(
    kubelet: Callable[[Handler], Path], api: ModuleType
) -> None:
    answer = recorded(api, "gpu-operator-node.json")
    requests: list[Any] = []

    def handler(request: Any, _context: grpc.ServicerContext) -> Any:
        requests.append(request)
        return answer

    resolver = resolver_for(kubelet(handler))
    assert [s.name for s in resolver.sources] == ["pod_resources", "hpc_job", "k8s"]
    readings = readings_of(NODE_PAGE)
    resolver.resolve(readings)
    assert attributed(readings) == [("ml-research/llama-ft", "pod_resources")] * 7 + [(None, None)]
    assert len(requests) == 1 and requests[0] == api.ListPodResourcesRequest()


def test_shared_gke_and_mig_device_ids_map_as_dcgm_exporter_maps_them(
    kubelet: Callable[[Handler], Path], api: ModuleType
) -> None:
    answer = recorded(api, "shared-and-gke.json")
    resolver = resolver_for(kubelet(lambda _request, _context: answer))
    page = (
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-8f2c1d90-3e5a-4b17-9c2e-5da9abb51763"} 1\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="2",UUID="GPU-aaaaaaaa-0000-0000-0000-000000000002"} 1\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="3",UUID="GPU-aaaaaaaa-0000-0000-0000-000000000003"} 1\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="4",UUID="GPU-aaaaaaaa-0000-0000-0000-000000000004",'
        'GPU_I_ID="1",GPU_I_PROFILE="1g.10gb"} 1\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="5",UUID="GPU-b8ea3855-276c-c9cb-b366-c6fa655957c5",'
        'GPU_I_ID="3",GPU_I_PROFILE="1g.10gb"} 1\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="6",UUID="GPU-1b2c3d4e-5f6a-7b8c-9d0e-1f2a3b4c5d6e"} 1\n'
    )
    readings = readings_of(page)
    resolver.resolve(readings)
    assert attributed(readings) == [
        ("tenants/infer-a", "pod_resources"),  # time-sliced by infer-a and infer-b: the smallest
        ("users/notebook-7f9c", "pod_resources"),  # GKE nvidia2
        ("users/shared", "pod_resources"),  # GKE nvidia3/vgpu1 (pod shared-1: rank suffix)
        ("users/mig-small", "pod_resources"),  # GKE nvidia4/gi1
        (None, None),  # a MIG UUID: needs NVML to find its GPU instance
        ("users/renamed-resource", "pod_resources"),  # nvidia.com/a100
    ]


@pytest.mark.parametrize(
    ("device_id", "key"),
    [
        ("GPU-b8ea3855-276c-c9cb-b366-c6fa655957c5", "GPU-b8ea3855-276c-c9cb-b366-c6fa655957c5"),
        ("GPU-b8ea3855-276c-c9cb-b366-c6fa655957c5::3", "GPU-b8ea3855-276c-c9cb-b366-c6fa655957c5"),
        ("nvidia0", "0"),
        ("nvidia12/vgpu3", "12"),
        ("nvidia1/gi2", "1:2"),
        ("MIG-b8ea3855-276c-c9cb-b366-c6fa655957c5", None),
        ("0000:3b:00.2", None),
    ],
)
def test_device_id_to_gpu_key(device_id: str, key: str | None) -> None:
    assert gpu_key(device_id) == key


def test_no_socket_attributes_nothing_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    source = PodResources(tmp_path / "absent.sock")
    source.refresh()
    readings = readings_of(NODE_PAGE)
    assert [source.job_for(r) for r in readings] == [None] * 8
    assert caplog.records == []


def test_failing_or_garbage_answers_attribute_nothing_and_warn_once(
    kubelet: Callable[[Handler], Path], api: ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    answers: list[Any] = [recorded(api, "gpu-operator-node.json")]

    def handler(_request: Any, context: grpc.ServicerContext) -> Any:
        answer = answers[-1]
        if answer == "unavailable":
            context.abort(grpc.StatusCode.UNAVAILABLE, "kubelet restarting")
        return answer

    source = PodResources(kubelet(handler), timeout_s=5.0)
    (first, *_) = readings_of(NODE_PAGE)
    source.refresh()
    assert source.job_for(first) == "ml-research/llama-ft"
    for answer in ("unavailable", "unavailable", b"\x0a\xff\x01"):  # the last: truncated message
        answers.append(answer)
        source.refresh()
        assert source.job_for(first) is None  # never the previous answer's pod
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2  # UNAVAILABLE once (repeated), then the decode error
    assert "UNAVAILABLE" in warnings[0] or "kubelet restarting" in warnings[0]
    assert "past the end" in warnings[1]
    answers.append(recorded(api, "gpu-operator-node.json"))
    source.refresh()
    assert source.job_for(first) == "ml-research/llama-ft"


_text = st.text(max_size=12)
_group = st.tuples(_text, st.lists(_text, max_size=4))
_container = st.tuples(
    _text, st.lists(_group, max_size=3), st.lists(st.integers(0, 2**40), max_size=3)
)
_pod = st.tuples(_text, _text, st.lists(_container, max_size=3))


@settings(max_examples=200, deadline=None)
@given(pods=st.lists(_pod, max_size=4))
def test_decoder_reads_what_protobuf_writes(api: ModuleType, pods: list[Any]) -> None:
    message = api.ListPodResourcesResponse()
    expected: list[ContainerDevices] = []
    for name, namespace, containers in pods:
        pod = message.pod_resources.add(name=name, namespace=namespace)
        for container_name, groups, cpu_ids in containers:
            container = pod.containers.add(name=container_name, cpu_ids=cpu_ids)
            container.memory.add(memory_type="memory", size=2**33).topology.nodes.add(ID=1)
            for resource, ids in groups:
                group = container.devices.add(resource_name=resource, device_ids=ids)
                group.topology.nodes.add(ID=0)
                expected.append(
                    ContainerDevices(namespace, name, container_name, resource, tuple(ids))
                )
    assert decode_list_response(message.SerializeToString()) == expected


@given(data=st.binary(max_size=64))
def test_decoder_never_fails_except_with_value_error(data: bytes) -> None:
    with contextlib.suppress(ValueError):
        decode_list_response(data)
