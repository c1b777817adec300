"""Who analyses a stored trace, so that every stored trace is analysed, once, even when the server
analysing it stops first (on-demand profiling, warehouse.profiling.service).

Once a process's trace is stored (its entry `analyzing`), the entry carries a claim:

    analyser             the server analysing it (`analyser_id()`: host, pid and a random part,
                         new for every ProfilingService, so a restarted server is another one)
    analysis_renewed_at  when that server last said it still does (its clock, epoch seconds)
    analyses             how many analyses of the trace were started (1 when it is stored)

The server that stores a trace claims it in the transaction that records it, and renews the claim
every quarter of `server.profile_analysis_lease_s` while the trace waits in its queue or is being
analysed, however long that takes: a slow analysis that is alive keeps its trace. A claim not
renewed for a whole lease is stale (its server stopped, or lost the catalog that long), and any
server takes the analysis over by a compare-and-swap on the locked request row: the claim it saw
must still be there. Of two gateways racing for one trace the second waits on the row lock, then
reads the first one's fresh claim and leaves it. An embedded server is the only server of its
catalog, so at start it takes over every analysis left unfinished without waiting for a lease:
the process that held them is gone. Renewals leave the request's `updated` alone: a lease is no
progress, and the run timeout never expires a stored trace's process (profiling_service.sweep).

A finish counts only while its server holds the claim (`set_process(..., held_by=...)`), and so
does each `on_trace_uploaded` hook (warehouse.ingest.plugin_host): a server that lost the claim (a stopped
gateway whose worker thread still ran) stores nothing, and the hooks run once per trace, on the
last claimant. A trace whose analysis was started `ANALYSIS_ATTEMPTS` times without finishing
fails its process instead of stopping one server after another. The clocks of the servers sharing
a catalog must agree to well within a lease (as the run timeout already assumes).
Must never read a trace or run an analysis.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from fleetscope.errors import NotFoundError
from warehouse.catalog.profiling import get_trace
from warehouse.profiling import transitions

log = logging.getLogger(__name__)

# Three servers stopped in the middle of one trace's analysis: take the trace for the cause (an
# analysis that runs out of memory, a parser that hangs) rather than the servers' bad luck.
ANALYSIS_ATTEMPTS = 3


def analyser_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def claim(analyser: str, now_s: float, analyses: int = 1) -> dict[str, Any]:
    """The entry fields of `analyser`'s claim, made or renewed at `now_s`."""
    return {"analyser": analyser, "analysis_renewed_at": now_s, "analyses": analyses}


@dataclass(frozen=True)
class Held:
    """One process's trace whose analysis this server claimed."""

    request_id: int
    host: str
    pid: int
    trace_id: str


@dataclass(frozen=True)
class Adopted:
    """A stored trace whose analysis this server took over: what it needs to queue it again."""

    request_id: int
    job_id: str
    host: str
    pid: int
    rank: int | None
    trace_id: str
    location: str
    analyses: int


@dataclass(frozen=True)
class Stale:
    """An analysis nobody renewed, with the claim as seen (the compare-and-swap's expectation)."""

    request_id: int
    host: str
    pid: int
    seen: tuple[Any, Any]


def stale_claims(
    conn: Any, me: str, now_s: float, lease_s: float, *, everyone_gone: bool
) -> list[Stale]:
    """Analysing entries of running requests that another server claimed and stopped renewing
    for a lease (`everyone_gone`: all of them). An entry without a claim (stored by an older
    server) counts from its request's last change."""
    found = []
    for request in transitions.open_requests(conn):
        for e in request.matched or []:
            if e.get("state") != "analyzing" or e.get("analyser") == me:
                continue
            renewed = e.get("analysis_renewed_at")
            if not isinstance(renewed, int | float):
                renewed = request.updated.timestamp()
            if everyone_gone or now_s - renewed > lease_s:
                seen = (e.get("analyser"), e.get("analysis_renewed_at"))
                found.append(Stale(request.id, e["host"], e["pid"], seen))
    return found


def take_over(conn: Any, stale: Stale, me: str, now_s: float) -> Adopted | None:
    """Claim a stale analysis for `me` if its claim is still the one seen (checked on the locked
    row); or fail its process when it was started ANALYSIS_ATTEMPTS times. None: nothing to do."""
    request = transitions.get_request(conn, stale.request_id, lock=True)
    current = transitions.entry(request, stale.host, stale.pid)
    if request.state != "running" or current is None or current.get("state") != "analyzing":
        return None
    if (current.get("analyser"), current.get("analysis_renewed_at")) != stale.seen:
        return None  # renewed, or taken over by another server meanwhile
    started = int(current.get("analyses") or 1)
    where = (stale.request_id, stale.host, stale.pid, {"analyzing"})
    if started >= ANALYSIS_ATTEMPTS:
        error = (
            f"its trace was stored; {started} analyses of it were started and none finished "
            "(the server analysing it stopped each time)"
        )
        transitions.set_process(conn, *where, state="failed", error=error)
        return None
    transitions.set_process(conn, *where, **claim(me, now_s, started + 1))
    trace = get_trace(conn, current["trace_id"])
    return Adopted(
        request.id,
        request.job_id,
        stale.host,
        stale.pid,
        trace.rank,
        trace.trace_id,
        trace.path,
        started + 1,
    )


class AnalysisLeases:
    """This server's claims: renewed while held, and other servers' stale claims taken over
    (`adopted` queues each for analysis), on one thread of their own, so that an analysis
    running on the worker thread never delays its renewal."""

    def __init__(
        self,
        catalog: Engine,
        lock: AbstractContextManager[Any],
        *,
        lease_s: float,
        clock: Callable[[], float],
        sole_server: bool,
        adopted: Callable[[Adopted], None],
    ) -> None:
        self.analyser = analyser_id()
        self.catalog = catalog
        self.lease_s = lease_s
        self._lock = lock
        self._clock = clock
        self._sole_server = sole_server
        self._adopted = adopted
        self._held: dict[str, Held] = {}
        self._held_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def claim(self) -> dict[str, Any]:
        return claim(self.analyser, self._clock())

    def hold(self, held: Held) -> None:
        with self._held_lock:
            self._held[held.trace_id] = held

    def release(self, trace_id: str) -> None:
        with self._held_lock:
            self._held.pop(trace_id, None)

    def holds(self, request_id: int, host: str, pid: int) -> bool:
        """Whether the catalog names this server as the analyser of that process's trace."""
        try:
            with self.catalog.connect() as conn:
                request = transitions.get_request(conn, request_id)
        except NotFoundError:
            return False
        current = transitions.entry(request, host, pid)
        return current is not None and current.get("analyser") == self.analyser

    # -- the thread ------------------------------------------------------------------------------
    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="fleetscope-leases", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop renewing: what this server still holds goes to another server after a lease."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def _run(self) -> None:
        everyone_gone = self._sole_server
        while True:
            try:
                self.renew()
                self.take_over_stale(everyone_gone=everyone_gone)
                everyone_gone = False
            except Exception:  # the catalog unreachable a while: try again next round
                log.exception("analysis leases: renewal or take-over failed")
            if self._stop.wait(self.lease_s / 4):
                return

    def renew(self) -> None:
        with self._held_lock:
            held = list(self._held.values())
        for h in held:
            with self._lock, self.catalog.begin() as conn:
                renewed = transitions.set_process(
                    conn,
                    h.request_id,
                    h.host,
                    h.pid,
                    {"analyzing"},
                    held_by=self.analyser,
                    touch=False,
                    analysis_renewed_at=self._clock(),
                )
            if not renewed:  # finished meanwhile, or lost: its outcome here will not count
                self.release(h.trace_id)

    def take_over_stale(self, *, everyone_gone: bool = False) -> list[Adopted]:
        with self.catalog.connect() as conn:
            found = stale_claims(
                conn, self.analyser, self._clock(), self.lease_s, everyone_gone=everyone_gone
            )
        adopted = []
        for stale in found:  # each re-checked on its locked row, in its own transaction
            with self._lock, self.catalog.begin() as conn:
                taken = take_over(conn, stale, self.analyser, self._clock())
            if taken is None:
                continue
            log.warning(
                "trace %s: its analyser %s stopped; analysing it here (analysis %d)",
                taken.trace_id,
                stale.seen[0],
                taken.analyses,
            )
            self.hold(Held(taken.request_id, taken.host, taken.pid, taken.trace_id))
            self._adopted(taken)
            adopted.append(taken)
        return adopted
