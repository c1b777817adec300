"""Scheduler hooks: post job metadata to ingest when simulated jobs start and end.

What it is for: the catalog learns user, team, job name and model the way a Slurm
prolog/epilog or a Kubernetes admission hook would tell it: `POST {ingest_url}/v1/jobs` with a
JSON list of records.job_record dicts, end_ts null at start and set at the end. Ingest being
down is normal: unsent records stay queued and go with the next tick; a 4xx answer is logged and
the batch dropped (sending it again as is would fail again).

Must never: block serving, raise out of its thread, or read the clock other than through the
injected one.
"""

from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from simulator.records import job_record
from simulator.sim import FleetSimulator

__all__ = ["JobHook"]

log = logging.getLogger(__name__)


class JobHook:
    """Finds job starts and ends on each tick of the clock and posts them."""

    def __init__(
        self,
        sim: FleetSimulator,
        clock: Callable[[], float],
        ingest_url: str,
        token: str,
        *,
        timeout_s: float = 5.0,
    ) -> None:
        self.sim = sim
        self.clock = clock
        self.url = ingest_url.rstrip("/") + "/v1/jobs"
        self.token = token
        self.timeout_s = timeout_s
        self._started: set[int] = set()
        self._ended: set[int] = set()
        self._queue: list[dict[str, Any]] = []
        self._since: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.posted = 0  # records accepted by ingest, for tests and logs

    def tick(self) -> None:
        """Queue the starts and ends up to now, then try to send the queue once.

        Jobs that ended before the hook's first tick are never announced: nothing was served
        for them. A job still running at the first tick is announced as started then.
        """
        now = self.clock()
        if self._since is None:
            self._since = now
        for job in self.sim.fleet.jobs:
            if job.index in self._ended:
                continue
            if job.end_s <= now:
                self._ended.add(job.index)
                if job.index in self._started or job.end_s > self._since:
                    self._queue.append(job_record(self.sim.fleet, job))
            elif job.start_s <= now and job.index not in self._started:
                self._started.add(job.index)
                self._queue.append(job_record(self.sim.fleet, job, running=True))
        if self._queue:
            self._send()

    def _send(self) -> None:
        body = json.dumps(self._queue).encode()
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            if 400 <= exc.code < 500:
                log.error("ingest refused %d job records: %s", len(self._queue), exc)
                self._queue = []
            else:
                log.warning(
                    "ingest answered %s; will retry %d job records", exc.code, len(self._queue)
                )
            return
        except (urllib.error.URLError, OSError) as exc:
            log.info("ingest unreachable (%s); will retry %d job records", exc, len(self._queue))
            return
        self.posted += len(self._queue)
        self._queue = []

    def start(self, interval_s: float = 1.0) -> JobHook:
        def loop() -> None:
            while not self._stop.is_set():
                try:
                    self.tick()
                except Exception:  # the hook must never take the simulator down
                    log.exception("job hook tick failed")
                self._stop.wait(interval_s)

        self._thread = threading.Thread(target=loop, name="sim-job-hook", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
