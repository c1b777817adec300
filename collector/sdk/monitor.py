"""Step accounting inside the training process.

A step is the time from asking the DataLoader for batch i to asking it for batch i+1; the part of
it spent inside the DataLoader's `__next__` is `data_wait_s`. This is the definition of the PyTorch
profiler's TensorBoard plugin (its DataLoader share) and of TensorFlow's input-pipeline analysis,
measured without a profiler: two clock reads per step. On a GPU, step times are right on average
as long as the script synchronises once per step (`loss.item()` does); a script that never
synchronises shows its CPU-side step time.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from collector.sdk import messages
from collector.sdk.profiling import ProfileSession

T = TypeVar("T")

DEFAULT_AGENT_SOCKET = "/run/fleetscope/agent.sock"  # settings agent.sdk_socket


def _env_int(*names: str) -> int | None:
    for name in names:
        value = os.environ.get(name, "")
        if value.strip().isdigit():
            return int(value)
    return None


def batch_size_of(batch: Any) -> int | None:
    """Rows in a batch: a tensor's first dimension, or that of the first member of a tuple/dict."""
    if isinstance(batch, dict):
        batch = next(iter(batch.values()), None)
    elif isinstance(batch, (list, tuple)) and batch:
        batch = batch[0]
    shape = getattr(batch, "shape", None)
    if shape is not None and len(shape) > 0:
        return int(shape[0])
    return None


@dataclass
class _Step:
    number: int
    fetch_start: float
    data_wait_s: float
    batch_size: int | None
    h2d_copy_s: float = 0.0


class StepMonitor:
    """Times steps, sends them to the agent, and runs profiles the agent asks for."""

    def __init__(
        self,
        agent_socket: str | None,
        *,
        job_id: str | None = None,
        rank: int = 0,
        host: str | None = None,
        clock: Callable[[], float] = time.perf_counter,
        wall_clock: Callable[[], float] = time.time,
        listen: bool = True,
    ) -> None:
        self.agent_socket = agent_socket
        self.job_id = job_id
        self.rank = rank
        self.host = host or socket.gethostname()
        self.pid = os.getpid()
        self.sent = 0
        self.dropped = 0
        self._clock = clock
        self._wall_clock = wall_clock
        self._step_number = 0
        self._current: _Step | None = None
        self._workers: int | None = None
        self._flops_per_step: float | None = None
        self._compute_dtype: str | None = None
        self._send_socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._send_socket.setblocking(False)
        self._profile_lock = threading.Lock()
        # Requests wait their turn: one profile runs at a time, and a second request (an
        # automatic one beside a user's) must not replace the first, whose caller is waiting.
        self._pending_profiles: dict[str, dict[str, Any]] = {}  # by request id, oldest first
        self._profile: ProfileSession | None = None
        self.control_path: str | None = None
        self._control: socket.socket | None = None
        if listen and agent_socket:
            self._start_control_listener()
        self._send("hello", job_id=job_id, rank=rank, control=self.control_path, host=self.host)

    @classmethod
    def from_env(cls) -> StepMonitor:
        """Job and rank as launchers set them: torchrun (RANK), Slurm (SLURM_JOB_ID, SLURM_PROCID)."""
        return cls(
            os.environ.get("FLEETSCOPE_AGENT_SDK_SOCKET", DEFAULT_AGENT_SOCKET),
            job_id=os.environ.get("FLEETSCOPE_JOB_ID") or os.environ.get("SLURM_JOB_ID"),
            rank=_env_int("RANK", "SLURM_PROCID", "LOCAL_RANK") or 0,
        )

    # -- step accounting ---------------------------------------------------------------------
    def wrap(self, iterable: Iterable[T], workers: int | None = None) -> Iterator[T]:
        """Yield from `iterable`, timing each fetch; each batch drawn starts a step."""
        if workers is None:
            found = getattr(iterable, "num_workers", None)
            workers = found if isinstance(found, int) else None
        self._workers = workers
        iterator = iter(iterable)
        while True:
            fetch_start = self._clock()
            self._finish_step(fetch_start)
            try:
                batch = next(iterator)
            except StopIteration:
                return
            fetched = self._clock()
            self._step_number += 1
            self._current = _Step(
                self._step_number, fetch_start, fetched - fetch_start, batch_size_of(batch)
            )
            yield batch

    def report_flops(self, flops_per_step: float, dtype: str) -> None:
        """Send `flops_per_step` (this rank's model FLOPs of one step: collector.sdk.flops
        counts them) and the `dtype` its matmuls run in (bf16, fp16, tf32, fp8, fp32) with every
        later step: the numerator and the peak's column of measured MFU. Shapes decide the
        count, so one count holds while the batch shape does; report again when it changes."""
        self._flops_per_step = float(flops_per_step) if flops_per_step > 0 else None
        self._compute_dtype = dtype.casefold() if dtype else None

    @contextlib.contextmanager
    def h2d_copy(self) -> Iterator[None]:
        """Mark host-to-device copies of the current step (synchronise inside for GPU accuracy)."""
        start = self._clock()
        try:
            yield
        finally:
            if self._current is not None:
                self._current.h2d_copy_s += self._clock() - start

    def _finish_step(self, end: float) -> None:
        step, self._current = self._current, None
        if step is None:
            return
        step_time_s = max(end - step.fetch_start, 0.0)
        samples_per_s = (
            step.batch_size / step_time_s if step.batch_size and step_time_s > 0 else None
        )
        self._send(
            "step",
            job_id=self.job_id,
            rank=self.rank,
            step=step.number,
            ts=self._wall_clock(),
            step_time_s=step_time_s,
            data_wait_s=step.data_wait_s,
            h2d_copy_s=step.h2d_copy_s,
            batch_size=step.batch_size,
            samples_per_s=samples_per_s,
            dataloader_workers=self._workers,
            **(
                {"flops_per_step": self._flops_per_step, "compute_dtype": self._compute_dtype}
                if self._flops_per_step is not None
                else {}
            ),
        )
        self._advance_profile()

    # -- transport ---------------------------------------------------------------------------
    def _send(self, kind: str, **fields: Any) -> None:
        if not self.agent_socket:
            return
        try:
            self._send_socket.sendto(
                messages.encode(kind, pid=self.pid, **fields), self.agent_socket
            )
            self.sent += 1
        except (OSError, messages.MessageError):
            # No agent, a full buffer or an oversized message: drop, never disturb training.
            self.dropped += 1

    # -- on-demand profiling -------------------------------------------------------------------
    def _start_control_listener(self) -> None:
        folder = os.path.dirname(os.path.abspath(self.agent_socket or "."))
        path = os.path.join(folder, f"sdk-{self.pid}-{id(self):x}.sock")
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            control = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            control.bind(path)
        except OSError:
            return  # the agent's folder is not writable: step metrics still flow, profiling is off
        self.control_path = path
        self._control = control
        thread = threading.Thread(
            target=self._listen, args=(control,), name="fleetscope-sdk-control", daemon=True
        )
        thread.start()

    def _listen(self, control: socket.socket) -> None:
        while True:
            try:
                data = control.recv(messages.MAX_DATAGRAM_BYTES)
                message = messages.decode(data)
            except messages.MessageError:
                continue
            except OSError:
                return
            if message["type"] == "profile":
                self._queue_profile(message)

    def request_profile(self, request_id: str, out_dir: str, steps: int | None = None,
                        duration_s: float | None = None) -> None:  # fmt: skip
        """Profile the next steps; what the control listener does when the agent asks."""
        self._queue_profile({
            "request_id": request_id, "out_dir": out_dir, "steps": steps,
            "duration_s": duration_s,
        })  # fmt: skip

    def _queue_profile(self, request: dict[str, Any]) -> None:
        with self._profile_lock:
            self._pending_profiles.setdefault(str(request.get("request_id", "")), request)

    def _advance_profile(self) -> None:
        """At a step boundary (training thread): start, step or finish a profile."""
        if self._profile is None:
            with self._profile_lock:
                if not self._pending_profiles:
                    return
                request = self._pending_profiles.pop(next(iter(self._pending_profiles)))
            self._profile = ProfileSession.start(request, rank=self.rank, clock=self._clock)
            if self._profile.error is not None:
                self._report_profile(self._profile)
            return
        if self._profile.step():
            self._report_profile(self._profile)

    def _report_profile(self, session: ProfileSession) -> None:
        self._profile = None
        self._send("trace", request_id=session.request_id, path=session.path, error=session.error)

    def close(self) -> None:
        if self._profile is not None:
            self._profile.finish()
            self._report_profile(self._profile)
        self._send_socket.close()
        if self._control is not None:
            self._control.close()
        if self.control_path:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.control_path)


_MONITOR: StepMonitor | None = None
_MONITOR_LOCK = threading.Lock()


def get_monitor() -> StepMonitor:
    """The process's monitor, created from the environment on first use."""
    global _MONITOR
    with _MONITOR_LOCK:
        if _MONITOR is None:
            _MONITOR = StepMonitor.from_env()
        return _MONITOR


def instrument(iterable: Iterable[T]) -> Iterable[T]:
    """Wrap a DataLoader (or any iterable of batches) so that every pass over it is measured."""
    monitor = get_monitor()

    class _Instrumented:
        def __init__(self, inner: Iterable[T]) -> None:
            self._inner = inner

        def __iter__(self) -> Iterator[T]:
            return monitor.wrap(self._inner)

        def __len__(self) -> int:
            return len(self._inner)  # type: ignore[arg-type]

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

    return _Instrumented(iterable)


def report_flops(flops_per_step: float, dtype: str) -> None:
    """`StepMonitor.report_flops` on this process's monitor."""
    get_monitor().report_flops(flops_per_step, dtype)


def h2d_copy() -> contextlib.AbstractContextManager[None]:
    return get_monitor().h2d_copy()
