"""The SDK's FLOPs per step on the wire: `report_flops` rides on every later step datagram, the
agent's receiver turns them into step_samples' flops_per_step and compute_dtype, a step without
them (an older SDK) is null there, and a bad value is refused without spoiling the batch."""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.sdk import messages
from collector.sdk.monitor import StepMonitor
from collector.sdk.receiver import check_step, steps_table


@pytest.fixture
def agent_socket() -> Iterator[socket.socket]:
    folder = Path(f"/tmp/fs-flops-{time.monotonic_ns():x}")  # AF_UNIX paths: < 108 bytes
    folder.mkdir()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(str(folder / "agent.sock"))
    listener.settimeout(30)
    yield listener
    listener.close()
    shutil.rmtree(folder)


def _steps(listener: socket.socket, count: int) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    while len(out) < count:
        message = messages.decode(listener.recv(messages.MAX_DATAGRAM_BYTES))
        if message["type"] == "step":
            out.append(message)
    return out


def test_reported_flops_reach_step_samples(agent_socket: socket.socket) -> None:
    monitor = StepMonitor(agent_socket.getsockname(), job_id="j1", listen=False)
    loader = iter(monitor.wrap([1, 2, 3]))
    next(loader)
    next(loader)  # step 1 ends here, before the count is known: it carries none
    monitor.report_flops(3.2e12, "BF16")
    list(loader)
    monitor.close()
    first, *rest = _steps(agent_socket, 3)
    assert "flops_per_step" not in first
    assert [(m["flops_per_step"], m["compute_dtype"]) for m in rest] == [(3.2e12, "bf16")] * 2
    table = steps_table([first, *rest], host="node-1", cluster=None)
    assert table.column("flops_per_step").to_pylist() == [None, 3.2e12, 3.2e12]
    assert table.column("compute_dtype").to_pylist() == [None, "bf16", "bf16"]


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"flops_per_step": -1.0}, "step: flops_per_step must not be negative"),
        ({"flops_per_step": "many"}, "step: flops_per_step must be a finite number or null"),
        ({"compute_dtype": 16}, "step: compute_dtype must be a dtype name of 1-16 chars"),
        ({"compute_dtype": "x" * 17}, "step: compute_dtype must be a dtype name of 1-16 chars"),
    ],
)
def test_a_bad_flops_field_is_refused(changes: dict[str, object], error: str) -> None:
    message = {"pid": 1, "step": 4, "ts": 1.7e9, "step_time_s": 0.5, **changes}
    with pytest.raises(ValueError) as raised:
        check_step(message)
    assert str(raised.value) == error
