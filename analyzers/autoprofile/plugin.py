"""The server plug-in of the closed loop (`fleetscope.server`, after `analyzers.traces.service`).

Every `autoprofile.tick_s` it looks at the catalog's open findings of the trigger rules whose
job has the SDK attached (an agent reported one of its processes in its last poll), and, when
`autoprofile.periodic`, at every SDK-attached job; the budget (`policy.decide`) picks which get a
short profile through the server's profiling service, and each request is recorded with its
reason in `auto_profiles`. When the trace is analyzed (the trace service's hook has stored its
summary), `on_trace` writes the trace's evidence onto the chain and stores the refining trace
findings on the telemetry finding's job and bucket (refine.py). Never raises into the server.

In fleet mode every gateway loads it (`SERVER_MODES`): each refines the traces uploaded to it,
and the tick runs on one gateway at a time, the leader (warehouse.leadership: a PostgreSQL
advisory lock, taken over by another gateway within a tick when the leader dies), since every
gateway ticking would request each finding's profile and spend the budget once per gateway. A
leader rather than a Celery beat task keeps the loop one plug-in with one setting (`tick_s`) in
both modes and needs no Celery deployment for it; the budget and the `auto_profiles` records it
reads are in the shared catalog, so a new leader goes on where the last one stopped.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from analyzers.autoprofile.policy import Budget, Candidate, Decision, Past, decide
from analyzers.autoprofile.refine import refined_findings, trace_evidence
from analyzers.run.clock import align_down
from analyzers.run.results import to_catalog
from warehouse.catalog import autoprofile as chain
from warehouse.catalog import findings as cat
from warehouse.catalog.profiling import get_trace
from warehouse.leadership import Leadership

log = logging.getLogger(__name__)

__all__ = ["AutoProfiler", "setup"]

# Server plug-in order (fleetscope.plugins): after the trace service's hook (20), since
# `on_trace` reads the summary that hook stored for the same upload.
PLUGIN_ORDER = 50
SERVER_MODES = ("embedded", "fleet")  # fleetscope.plugins.server_modes; the tick has one leader


def setup(server: Any) -> None:
    if not server.settings.autoprofile.enabled:
        return
    loop = AutoProfiler(server.catalog, server.profiling, server.settings)
    server.autoprofiler = loop  # for the finding view and tests
    server.on_start.append(lambda _srv: loop.start())
    server.on_stop.append(lambda _srv: loop.stop())
    server.on_trace_uploaded.append(lambda _srv, upload: loop.on_trace(upload))


class AutoProfiler:
    def __init__(self, catalog: Any, profiling: Any, settings: Any) -> None:
        self.catalog = catalog
        self.profiling = profiling
        self.settings = settings
        self.budget = Budget.from_settings(settings)
        self.rules = [r.strip() for r in settings.autoprofile.trigger_rules.split(",")]
        self.periodic = settings.autoprofile.periodic
        self.steps = settings.autoprofile.steps
        self.tick_s = settings.autoprofile.tick_s
        self.bucket_s = settings.analyzers.bucket_s
        self.leadership = Leadership(catalog, "autoprofile.tick")
        self.rounds = 0  # loop rounds, led or not (tests wait on these, never on the clock)
        self.led = 0  # rounds this server ticked as the leader
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._run, name="fleetscope-autoprofile", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.leadership.release()

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                if self.leadership.leads():
                    self.tick(datetime.now(UTC))
                    self.led += 1
            except Exception:  # never let one bad tick stop the loop
                log.exception("autoprofile tick failed")
            self.rounds += 1

    # -- requests --------------------------------------------------------------------------------
    def _attached(self, now: datetime) -> dict[str, int]:
        """SDK-attached jobs, with how many processes (ranks) agents report for each."""
        since = now.timestamp() - self.profiling.config.match_timeout_s
        jobs: dict[str, int] = {}
        for agent in self.profiling.registry.recent(since):
            for process in agent.processes:
                if process.job_id:
                    jobs[process.job_id] = jobs.get(process.job_id, 0) + 1
        return jobs

    def candidates(self, now: datetime) -> list[Candidate]:
        attached = self._attached(now)
        out: list[Candidate] = []
        with self.catalog.connect() as conn:
            asked = {a.finding_id for a in chain.auto_profiles_since(conn, now - timedelta(days=7))}
            for rule in self.rules:
                for f in cat.list_findings(
                    conn, state="open", rule_id=rule, since=now - timedelta(days=1)
                ):
                    if f.job_id in attached and f.finding_id not in asked:
                        out.append(
                            Candidate(f.job_id, max(1, len(f.gpus or ())), "triggered", f.user,
                                      f.team, f.finding_id, f.rule_id, f.wasted_gpu_hours)
                        )  # fmt: skip
        if self.periodic:
            out += [Candidate(job, ranks, "periodic") for job, ranks in sorted(attached.items())]
        return out

    def tick(self, now: datetime) -> list[Decision]:
        """Request the profiles the budget allows now; every decision, approved or not."""
        wanted = self.candidates(now)
        if not wanted:
            return []
        horizon = now - timedelta(seconds=max(self.budget.job_interval_s, 86400.0))
        with self.catalog.connect() as conn:
            past = [
                Past(a.job_id, a.team, a.gpu_seconds, a.created)
                for a in chain.auto_profiles_since(conn, horizon)
            ]
        decisions = decide(wanted, past, self.budget, now)
        for d in decisions:
            if not d.approved:
                continue
            c = d.candidate
            try:
                request_id = self.profiling.create(c.job_id, steps=self.steps)
            except Exception as exc:  # an unknown job, a stopped process: next tick decides again
                log.warning("autoprofile: no request for %s: %s", c.job_id, exc)
                continue
            with self.catalog.begin() as conn:
                chain.record_auto_profile(
                    conn, request_id=request_id, job_id=c.job_id, team=c.team, reason=c.reason,
                    gpu_seconds=d.gpu_seconds, finding_id=c.finding_id, rule_id=c.rule_id, now=now,
                )  # fmt: skip
        return decisions

    # -- refinement ------------------------------------------------------------------------------
    def on_trace(self, upload: Any) -> None:
        try:
            self.refine(upload.request_id, upload.trace_id)
        except Exception:
            log.exception("autoprofile: trace %s not attached to its finding", upload.trace_id)

    def refine(self, request_id: int, trace_id: str) -> int:
        """Attach an analyzed trace to its chain; returns the trace findings stored."""
        stored = 0
        with self.catalog.begin() as conn:
            links = chain.auto_profiles_of(conn, request_id=request_id)
            if not links:
                return 0
            summary = get_trace(conn, trace_id).summary
            if not summary:
                return 0
            for link in links:
                chain.set_trace_evidence(
                    conn, link.id, trace_id, trace_evidence(summary, link.rule_id)
                )
                finding = self._finding(conn, link.finding_id)
                if finding is not None:
                    meta = (finding.evidence or {}).get("_meta", {})
                    bucket = meta.get("bucket_start")
                    start, end = finding.window_start, finding.window_end
                    user, team = finding.user, finding.team
                    bucket_start = datetime.fromisoformat(bucket) if bucket else start
                else:  # periodic: the analyzers' bucket the trace arrived in
                    start = align_down(link.created, self.bucket_s)
                    end, bucket_start = start + timedelta(seconds=self.bucket_s), start
                    user, team = None, link.team
                found = refined_findings(
                    summary, rule_id=link.rule_id, job_id=link.job_id, window_start=start,
                    window_end=end, bucket_start=bucket_start,
                )  # fmt: skip
                found = [f.with_job_info(user=user, team=team, job_name=None) for f in found]
                cat.upsert_findings(conn, [to_catalog(f) for f in found], run_id="autoprofile")
                stored += len(found)
        return stored

    @staticmethod
    def _finding(conn: Any, finding_id: str | None) -> cat.Finding | None:
        if finding_id is None:
            return None
        row = (
            conn.execute(select(cat.findings).where(cat.findings.c.finding_id == finding_id))
            .mappings()
            .first()
        )
        return cat.Finding(**row) if row is not None else None
