"""Agent side of the SDK protocol: receive step metrics, know the training processes, ask for traces.

Runs in the agent. Bounded everywhere: at most `max_steps` step rows wait for the shipper (the
oldest go first and are counted as dropped), and processes not heard from for `process_ttl_s` are
forgotten. Malformed datagrams are counted and dropped; nothing a training process sends can stop
the agent.
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from collector.sdk import messages
from fleetscope.contract import STEP_SAMPLES


@dataclass
class TrainingProcess:
    pid: int
    job_id: str | None
    rank: int | None
    control: str | None
    host: str | None
    last_seen: float


@dataclass(frozen=True)
class TraceNotice:
    pid: int
    request_id: str
    path: str | None
    error: str | None


class StepReceiver:
    def __init__(
        self,
        socket_path: Path,
        *,
        host: str,
        cluster: str | None = None,
        max_steps: int = 100_000,
        process_ttl_s: float = 600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.socket_path = socket_path
        self.host = host
        self.cluster = cluster
        self.dropped_steps = 0
        self.malformed = 0
        self._steps: deque[dict[str, Any]] = deque()
        self._max_steps = max_steps
        self._ttl_s = process_ttl_s
        self._clock = clock
        self._processes: dict[int, TrainingProcess] = {}
        self._lock = threading.Lock()
        self.traces: queue.Queue[TraceNotice] = queue.Queue()
        socket_path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            socket_path.unlink()
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            self._socket.bind(str(socket_path))
        except OSError:
            self._socket.close()
            raise
        # recv blocks; stop() wakes it with an empty datagram. The timeout is only a safety net
        # (an idle agent woke twice a second here with 0.5 s: measurable at 1 Hz, bench/agent.py).
        self._socket.settimeout(5.0)
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sdk-receiver", daemon=True)

    def start(self) -> StepReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        with (
            contextlib.suppress(OSError),
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as waker,
        ):
            waker.sendto(b"", str(self.socket_path))
        self._thread.join(timeout=5)
        self._socket.close()
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                data = self._socket.recv(messages.MAX_DATAGRAM_BYTES)
            except TimeoutError:
                continue
            except OSError:
                return
            if self._stopped.is_set():
                return
            try:
                self.handle(messages.decode(data))
            except (messages.MessageError, KeyError, TypeError, ValueError):
                self.malformed += 1

    def handle(self, message: dict[str, Any]) -> None:
        pid = int(message["pid"])
        now = self._clock()
        with self._lock:
            known = self._processes.get(pid)
            if message["type"] == "hello" or known is None:
                known = TrainingProcess(
                    pid=pid,
                    job_id=message.get("job_id"),
                    rank=message.get("rank"),
                    control=message.get("control"),
                    host=message.get("host"),
                    last_seen=now,
                )
                self._processes[pid] = known
            known.last_seen = now
            if message["type"] == "step":
                check_step(message)
                if len(self._steps) >= self._max_steps:
                    self._steps.popleft()
                    self.dropped_steps += 1
                self._steps.append(message)
        if message["type"] == "trace":
            self.traces.put(
                TraceNotice(
                    pid, str(message["request_id"]), message.get("path"), message.get("error")
                )
            )

    def processes(self) -> list[TrainingProcess]:
        """Live training processes on this host (heard from within the TTL)."""
        now = self._clock()
        with self._lock:
            for pid in [
                p for p, proc in self._processes.items() if now - proc.last_seen > self._ttl_s
            ]:
                del self._processes[pid]
            return list(self._processes.values())

    @property
    def pending_steps(self) -> int:
        """Step rows waiting for the next drain (a cheap check: no lock, no table)."""
        return len(self._steps)

    def drain_steps(self) -> pa.Table:
        """Every step received since the last drain, as a `step_samples` batch."""
        with self._lock:
            rows, self._steps = list(self._steps), deque()
        return steps_table(rows, host=self.host, cluster=self.cluster)

    def request_profile(self, process: TrainingProcess, request: dict[str, Any]) -> bool:
        """Send a profile request to one process's control socket; False if it cannot be reached."""
        if not process.control or not os.path.exists(process.control):
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
            try:
                sender.sendto(messages.encode("profile", **request), process.control)
            except OSError:
                return False
        return True


_INT32 = 2**31 - 1
_STEP_NUMBERS = ("data_wait_s", "h2d_copy_s", "samples_per_s", "flops_per_step")
# analyzers.mfu.peaks' dtypes are short words; a longer string is not a dtype
_MAX_DTYPE_CHARS = 16
_STEP_INTS = {"rank": _INT32, "dataloader_workers": _INT32, "batch_size": 2**63 - 1}


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def check_step(message: dict[str, Any]) -> None:
    """ValueError unless a step message fits step_samples (a bad one must not spoil a batch)."""
    if not _is_number(message.get("ts")) or not _is_number(message.get("step_time_s")):
        raise ValueError("step: ts and step_time_s must be finite numbers")
    step = message.get("step")
    if not isinstance(step, int) or isinstance(step, bool) or abs(step) > 2**63 - 1:
        raise ValueError("step: step must be an integer")
    if not -_INT32 <= int(message["pid"]) <= _INT32:
        raise ValueError("step: pid out of range")
    for name in _STEP_NUMBERS:
        if message.get(name) is not None and not _is_number(message[name]):
            raise ValueError(f"step: {name} must be a finite number or null")
    for name, high in _STEP_INTS.items():
        value = message.get(name)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not -high <= value <= high
        ):
            raise ValueError(f"step: {name} must be an integer or null")
    if message.get("job_id") is not None and not isinstance(message["job_id"], str):
        raise ValueError("step: job_id must be a string or null")
    flops = message.get("flops_per_step")
    if flops is not None and flops < 0:
        raise ValueError("step: flops_per_step must not be negative")
    dtype = message.get("compute_dtype")
    if dtype is not None and (not isinstance(dtype, str) or not 0 < len(dtype) <= _MAX_DTYPE_CHARS):
        raise ValueError(f"step: compute_dtype must be a dtype name of 1-{_MAX_DTYPE_CHARS} chars")


def steps_table(rows: list[dict[str, Any]], *, host: str, cluster: str | None) -> pa.Table:
    def column(name: str) -> list[Any]:
        return [row.get(name) for row in rows]

    return pa.table(
        {
            "ts": [datetime.fromtimestamp(float(row["ts"]), tz=UTC) for row in rows],
            "cluster": [cluster] * len(rows),
            "host": [host] * len(rows),
            "job_id": column("job_id"),
            "rank": column("rank"),
            "pid": column("pid"),
            "step": column("step"),
            "step_time_s": column("step_time_s"),
            "data_wait_s": column("data_wait_s"),
            "h2d_copy_s": column("h2d_copy_s"),
            "batch_size": column("batch_size"),
            "samples_per_s": column("samples_per_s"),
            "dataloader_workers": column("dataloader_workers"),
            "flops_per_step": column("flops_per_step"),  # an older SDK sends none: null
            "compute_dtype": column("compute_dtype"),
        },
        schema=STEP_SAMPLES,
    )
