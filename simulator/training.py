"""Live mode's training processes: every simulated rank reports its steps to its host's agent.

What it is for: design.md's simulator "also plays training processes that report step metrics".
Each second, the ranks of every running job send what the SDK in a real training process sends
(collector/sdk/messages.py): a `hello` the first time, then one `step` datagram per newly finished
step, to the agent socket of their host (`socket_for(host)`, e.g. `DIR/<host>.sock`). Values come
from the same step model as batch mode (batch.tables' step_samples: the last step each rank
finished at that second), so live and batch data agree. A missing agent drops the datagram, as the
real SDK does; the count is kept in `dropped`.

Unlike the SDK, a send waits up to SEND_TIMEOUT_S for room in the agent's queue: one second's
burst of a host's ranks can exceed the kernel's datagram queue (net.unix.max_dgram_qlen, often
10), which a real training process, sending one step at a time, never does. Must never compute
values itself.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from collector.sdk import messages
from simulator.fleet import Host
from simulator.sim import FleetSimulator

__all__ = ["TrainingProcesses", "socket_template"]

Clock = Callable[[], float]
SEND_TIMEOUT_S = 0.1


def socket_template(template: str) -> Callable[[Host], Path]:
    """`{host}` and `{index}` in `template` name each host's agent socket."""

    def socket_for(host: Host) -> Path:
        return Path(template.format(host=host.name, index=host.index))

    return socket_for


class TrainingProcesses:
    def __init__(
        self, sim: FleetSimulator, clock: Clock, socket_for: Callable[[Host], Path]
    ) -> None:
        self.sim = sim
        self._clock = clock
        self._paths = {host.name: str(socket_for(host)) for host in sim.hosts}
        self._last_step: dict[tuple[str, str, int], int] = {}
        self._sender = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sender.settimeout(SEND_TIMEOUT_S)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sim-training", daemon=True)
        self.sent = 0
        self.dropped = 0

    def play(self, t: int) -> int:
        """Send the steps every rank finished by second `t` and not sent yet; returns how many."""
        table = self.sim.tables(t, t + 1, 1)["step_samples"]
        sent = 0
        for row in table.to_pylist():
            key = (row["host"], row["job_id"], row["rank"])
            last = self._last_step.get(key)
            if last is not None and row["step"] <= last:
                continue
            path = self._paths[row["host"]]
            if last is None:
                self._send(path, "hello", row, job_id=row["job_id"], rank=row["rank"],
                           control=None, host=row["host"])  # fmt: skip
            self._last_step[key] = row["step"]
            ts: datetime = row["ts"]
            fields = {name: row[name] for name in messages.STEP_FIELDS if name not in ("pid", "ts")}
            if fields["flops_per_step"] is None:  # as the SDK: no FLOPs reported, no such keys
                del fields["flops_per_step"], fields["compute_dtype"]
            sent += self._send(path, "step", row, ts=ts.timestamp(), **fields)
        return sent

    def _send(self, path: str, kind: str, row: dict[str, Any], **fields: Any) -> int:
        try:
            self._sender.sendto(messages.encode(kind, pid=row["pid"], **fields), path)
        except OSError:  # no agent listening (yet), or its buffer is full: drop, as the SDK does
            self.dropped += 1
            return 0
        self.sent += 1
        return 1

    def _run(self) -> None:
        while not self._stop.is_set():
            now = self._clock()
            self.play(int(now))
            self._stop.wait(max(0.0, int(now) + 1 - self._clock()))

    def start(self) -> TrainingProcesses:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._sender.close()
