"""One on-demand torch.profiler session, driven from step boundaries in the training thread.

torch.profiler must start and stop in the thread that runs the steps, so the SDK's control
listener only records the request and the training thread calls `start`/`step` at the next
boundaries. `prof.step()` at each boundary writes the `ProfilerStep#N` annotations that trace
analyses (ours and HTA) use to cut the trace into steps. Any failure becomes `error` on the
session and is reported to the agent; training goes on.
"""

from __future__ import annotations

import gzip
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_PROFILE_STEPS = 5
MAX_DURATION_STEPS = 100_000  # a --duration profile ends on time, long before this


@dataclass
class ProfileSession:
    request_id: str
    out_dir: str
    steps: int | None
    duration_s: float | None
    rank: int
    started_at: float
    clock: Callable[[], float]
    profiler: Any = None
    steps_done: int = 0
    path: str | None = None
    error: str | None = None

    @classmethod
    def start(
        cls, request: dict[str, Any], *, rank: int, clock: Callable[[], float]
    ) -> ProfileSession:
        steps = request.get("steps")
        duration_s = request.get("duration_s")
        session = cls(
            request_id=str(request.get("request_id", "")),
            out_dir=str(request.get("out_dir") or "."),
            steps=int(steps) if steps else (None if duration_s else DEFAULT_PROFILE_STEPS),
            duration_s=float(duration_s) if duration_s else None,
            rank=rank,
            started_at=clock(),
            clock=clock,
        )
        try:
            import torch
            from torch.profiler import ProfilerActivity, profile, schedule

            activities = [ProfilerActivity.CPU]
            if torch.cuda.is_available():
                activities.append(ProfilerActivity.CUDA)
            # A schedule is what makes prof.step() write ProfilerStep#N; one warm-up step first,
            # as the profiler itself recommends, so the first recorded step is not skewed.
            active = session.steps or MAX_DURATION_STEPS
            session.profiler = profile(
                activities=activities, schedule=schedule(wait=0, warmup=1, active=active, repeat=1)
            )
            session.profiler.start()
        except Exception as exc:  # torch missing or the profiler refused: report, don't crash
            session.error = f"could not start torch.profiler: {exc}"
        return session

    def step(self) -> bool:
        """Mark a step boundary; True once the requested steps or duration are done."""
        if self.profiler is None:
            return True
        self.steps_done += 1
        try:
            self.profiler.step()
        except Exception as exc:
            self.error = f"torch.profiler failed during step {self.steps_done}: {exc}"
            return True
        elapsed = self.clock() - self.started_at
        recorded_steps = self.steps_done - 1  # the first boundary ends the warm-up step
        if (self.steps is not None and recorded_steps >= self.steps) or (
            self.duration_s is not None and elapsed >= self.duration_s
        ):
            self.finish()
            return True
        return False

    def finish(self) -> None:
        if self.profiler is None or self.path is not None:
            return
        try:
            self.profiler.stop()
            os.makedirs(self.out_dir, exist_ok=True)
            name = f"trace-{self.request_id}-rank{self.rank}-pid{os.getpid()}.pt.trace.json"
            plain = os.path.join(self.out_dir, name)
            self.profiler.export_chrome_trace(plain)
            with open(plain, "rb") as source, gzip.open(plain + ".gz", "wb") as target:
                shutil.copyfileobj(source, target)
            os.unlink(plain)
            self.path = plain + ".gz"
        except Exception as exc:
            self.error = f"could not write the trace: {exc}"
        finally:
            self.profiler = None
