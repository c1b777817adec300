"""Decoding the kubelet's `v1.ListPodResourcesResponse` from its protobuf bytes, by hand.

Only the fields attribution needs are read (pod name and namespace, container name, each device
group's resource name and device ids: field numbers of k8s.io/kubelet/pkg/apis/podresources/v1/
api.proto); every other field (cpu_ids, memory, topology, dynamic_resources, and whatever later
Kubernetes releases add) is skipped by its wire type, as protobuf's own parsers skip unknown
fields. Why by hand: ~60 lines keep `protobuf` and generated code off every GPU node (the agent
extra adds only grpcio, which moves bytes and does not parse them).

Must never: trust a length it has not checked against the buffer (a truncated or corrupt answer
raises `ValueError` and the caller keeps no half-read state).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


@dataclass(frozen=True)
class ContainerDevices:
    """One device group of one container: `nvidia.com/gpu` and the ids the device plugin gave."""

    namespace: str
    pod: str
    container: str
    resource_name: str
    device_ids: tuple[str, ...]


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of every field: an int for varints, bytes for length-delimited ones;
    fixed-width fields are skipped (none of the fields read here is one)."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire == _VARINT:
            value, pos = _varint(data, pos)
            yield number, value
        elif wire == _LEN:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise ValueError(f"field {number}: {size} bytes past the end")
            yield number, data[pos : pos + size]
            pos += size
        elif wire in (_I64, _I32):
            pos += 8 if wire == _I64 else 4
            if pos > len(data):
                raise ValueError(f"field {number}: truncated fixed-width value")
        else:
            raise ValueError(f"field {number}: unsupported wire type {wire}")


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ValueError("expected a string, got a varint")
    return value.decode("utf-8")


def _message(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise ValueError("expected a message, got a varint")
    return value


def decode_list_response(data: bytes) -> list[ContainerDevices]:
    """Every device group of every container of every pod in a ListPodResourcesResponse."""
    out: list[ContainerDevices] = []
    for number, pod_bytes in fields(data):
        if number != 1:  # pod_resources
            continue
        name = namespace = ""
        containers: list[bytes] = []
        for field, value in fields(_message(pod_bytes)):
            if field == 1:
                name = _text(value)
            elif field == 2:
                namespace = _text(value)
            elif field == 3:
                containers.append(_message(value))
        for container in containers:
            out += _container_devices(container, namespace, name)
    return out


def _container_devices(data: bytes, namespace: str, pod: str) -> list[ContainerDevices]:
    container = ""
    groups: list[bytes] = []
    for field, value in fields(data):
        if field == 1:
            container = _text(value)
        elif field == 2:
            groups.append(_message(value))
    out = []
    for group in groups:
        resource = ""
        ids: list[str] = []
        for field, value in fields(group):
            if field == 1:
                resource = _text(value)
            elif field == 2:
                ids.append(_text(value))
        out.append(ContainerDevices(namespace, pod, container, resource, tuple(ids)))
    return out
