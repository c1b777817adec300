"""The local protocol between training processes and the agent: JSON datagrams on Unix sockets.

Datagrams keep the training side trivial and non-blocking: a send either fits in the socket buffer
at once or the sample is dropped; there is no connection to break. Every message is one JSON object
with `v` (protocol version) and `type`:

SDK -> agent (the agent's socket, setting `agent.sdk_socket`):
    hello   pid, job_id, rank, control (the SDK's own socket path), host
    step    pid, job_id, rank, step, ts (end of step, Unix s), step_time_s, data_wait_s,
            h2d_copy_s, batch_size, samples_per_s, dataloader_workers; and, where the script
            reported them (`sdk.report_flops`), flops_per_step and compute_dtype. Optional
            fields: an older SDK omits them and an older agent ignores them, so both stay
            protocol version 1.
    trace   pid, request_id, path (the written trace file) or error (why there is none)
agent -> SDK (the SDK's control socket):
    profile request_id, steps or duration_s, out_dir
"""

from __future__ import annotations

import json
from typing import Any, Final

PROTOCOL_VERSION: Final = 1
MAX_DATAGRAM_BYTES: Final = 16 * 1024

STEP_FIELDS: Final = (
    "pid", "job_id", "rank", "step", "ts", "step_time_s", "data_wait_s", "h2d_copy_s",
    "batch_size", "samples_per_s", "dataloader_workers", "flops_per_step", "compute_dtype",
)  # fmt: skip

KNOWN_TYPES: Final = frozenset({"hello", "step", "trace", "profile"})


class MessageError(ValueError):
    """A datagram that is not a protocol message; the receiver counts and drops it."""


def encode(kind: str, **fields: Any) -> bytes:
    payload = json.dumps({"v": PROTOCOL_VERSION, "type": kind, **fields}, separators=(",", ":"))
    data = payload.encode()
    if len(data) > MAX_DATAGRAM_BYTES:
        raise MessageError(f"{kind} message of {len(data)} bytes exceeds {MAX_DATAGRAM_BYTES}")
    return data


def decode(data: bytes) -> dict[str, Any]:
    try:
        message = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MessageError(f"not JSON: {exc}") from exc
    if not isinstance(message, dict):
        raise MessageError("not a JSON object")
    if message.get("v") != PROTOCOL_VERSION:
        raise MessageError(f"unsupported protocol version {message.get('v')!r}")
    if message.get("type") not in KNOWN_TYPES:
        raise MessageError(f"unknown message type {message.get('type')!r}")
    return message
