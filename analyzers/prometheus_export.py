"""Findings and GPU-hours as Prometheus metrics on the server's `/metrics` (issue 16).

A server plug-in: `analyzers.prometheus_export` in `server.plugins` (on by default) registers a
`FleetCollector` on the server's own registry, so the ingest server's `/metrics` carries, next to
its ingest and writer families:

| family | type | labels | what |
|---|---|---|---|
| `fleetscope_recoverable_gpu_seconds` | gauge | rule, team, job_id, hpc_job, cluster | open findings' GPU-seconds a fix returns (GPU-hours x 3600), findings whose window ends in the last `analyzers.metrics_window_s` |
| `fleetscope_recoverable_energy_joules`, `fleetscope_recoverable_money` | gauge | the same (money: plus currency) | their energy and, where prices are set, money (analyzers.prometheus_energy) |
| `fleetscope_findings_open` | gauge | rule, severity, team | open (not acknowledged, not suppressed) findings in that window |
| `fleetscope_job_gpu_efficiency_ratio`, `fleetscope_job_mfu_ratio` | gauge | job_id, hpc_job, team (MFU: and gpu_model, dtype) | active / allocated GPU-hours (where the active fraction is known) over that window's whole hours; measured MFU over that window (analyzers.prometheus_mfu) |
| `fleetscope_allocated_gpu_seconds_total` | counter | cluster | allocated GPU-seconds accounted since the warehouse's first sample |
| `fleetscope_active_gpu_seconds_total` | counter | cluster | active GPU-seconds (GR_ENGINE_ACTIVE, else GPU_UTIL) |
| `fleetscope_sm_active_gpu_seconds_total` | counter | cluster | SM-active GPU-seconds (DCGM_FI_PROF_SM_ACTIVE, where reported) |
| `fleetscope_allocated_gpu_energy_joules_total`, `fleetscope_idle_allocated_gpu_energy_joules_total` | counter | cluster | energy of allocated GPUs, and of those at 0 % utilization (analyzers.prometheus_energy) |
| `fleetscope_fleet_metrics_refreshed_timestamp_seconds` | gauge | | when the families above were last computed (stale: alert) |
| `fleetscope_fleet_metrics_refresh_failures_total` | counter | | refreshes that failed; the previous values are served |

Names follow Prometheus's rules (`fleetscope_` prefix, the base unit in the name: seconds, never
hours, as `promtool check metrics` asks; `_total` on counters, `_ratio` for 0-1; a dashboard divides
by 3600 to show GPU-hours). The job label is `job_id`, never `job`: Prometheus sets `job` on every
scraped series to the scrape job's name and, under the default `honor_labels: false`, renames a
`job` label it finds to `exported_job` (prometheus.io/docs/prometheus/latest/configuration,
honor_labels), which would break every rule and dashboard that selects on it. A Slurm job (its
catalog record came from Slurm: the prolog, scontrol, sacct or a Slurm import) also carries its id
as `hpc_job`, the label dcgm-exporter's HPC job mapping puts on the GPUs' series, so the two join
on it without a label_replace; other jobs have no `hpc_job` (an empty label). Cardinality is
bounded: only the `analyzers.metrics_top_jobs` jobs with the most recoverable (or allocated)
GPU-hours get their own `job_id` series; every other job is summed into `job_id="other"`. A missing
team or cluster is the empty label (Prometheus: no label). Summing `fleetscope_recoverable_gpu_seconds`
over `rule` counts a job flagged by several rules once per rule; `max by (job_id)` gives what
`fleetscope opportunities` reports per job.

The counters are the accounting of `analyzers.accounting` (through `analyzers.accounting.usage`)
over consecutive closed windows: each refresh adds the hours of [last end, now - lateness_s), so
samples arriving later than `analyzers.lateness_s` are counted only after a server restart
(Prometheus's `rate()` handles the reset). The job efficiency is incremental
(`analyzers.prometheus_hours`): the window's hour rows are kept between refreshes and a refresh
reads only the hours that can still change (about an hour plus `lateness_s`), in the same read as
the counters' range; the first refresh of a term reads the whole window, whose start is aligned down
to the hour. A sample arriving later than `lateness_s` is therefore left out of the efficiency until
its hour leaves the window, as it is left out of the counters. A snapshot is computed every
`analyzers.metrics_refresh_s` seconds on a thread of the plug-in's own (started and stopped with the
server), never on the writer thread and never while a scrape waits.

Both modes (`analyzers.prometheus_sources.SOURCES` picks the telemetry and the exporter by
`server.mode`). Embedded: the server's DuckDB warehouse; the counters start at its first sample.
Fleet: every gateway loads the plug-in, one exports: the leader (a PostgreSQL advisory lock,
`warehouse.leadership`) computes and serves every family above from the catalog and a pruned scan of
the Iceberg `gpu_samples` (and `step_samples`); the others serve none of them (their ingest families
stay). A gateway that takes the lead (the leader stopped or died) starts a new term: its counters
start from its own first refresh, at the first sample of the metrics window before it (a counter
reset on another `instance`, which `rate()` handles), so no term reads the whole history from the
object store.

Reads the catalog and the warehouse; must never write either, nor import the dashboard.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from analyzers import prometheus_mfu
from analyzers.prometheus_energy import energy_counters, energy_totals, evidence_series
from analyzers.prometheus_energy import families as energy_families
from analyzers.prometheus_hours import HourRows

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from analyzers.findings import Finding
    from analyzers.prometheus_sources import Telemetry
    from analyzers.run.results import StoredFinding

log = logging.getLogger(__name__)

# The catalog's jobs.scheduler values that mean Slurm: collector.owners' sources (the prolog's
# record, the job's environment, scontrol, sacct) and a POST /v1/jobs import naming it.
SLURM_SCHEDULERS = frozenset({"slurm", "slurm-prolog", "slurm-env", "scontrol", "sacct"})
OTHER = "other"  # the one `job_id` series every job outside the top N is summed into
HOUR_S = 3600.0


# Server plug-in order (fleetscope.plugins): after the scheduler and the reports, as it was.
PLUGIN_ORDER = 40
# fleetscope.plugins.server_modes: the telemetry per mode is analyzers.prometheus_sources's.
SERVER_MODES = ("embedded", "fleet")


def setup(server: Any) -> None:
    """Register the collector on the server's registry and refresh it on a thread of its own
    (warehouse.ingest.runtime plug-in hook), so a scrape never waits for a warehouse query; it serves
    the families while this server leads the export (always, on an embedded server)."""
    from analyzers.prometheus_sources import SOURCES

    settings = server.settings
    source = SOURCES[settings.server.mode](server)
    collector = FleetCollector(
        server.catalog,
        source.telemetry,
        window_s=settings.analyzers.metrics_window_s,
        top_jobs=settings.analyzers.metrics_top_jobs,
        refresh_s=settings.analyzers.metrics_refresh_s,
        lateness_s=settings.analyzers.lateness_s,
        default_interval_s=settings.agent.interval_s,
        max_gap_s=settings.analyzers.max_gap_s,
        background=True,
        exporting=not source.elected,  # elected: once it leads and has refreshed
    )
    server.metrics.registry.register(collector)
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def refresh_loop() -> None:
        while True:
            if _leads(source.leads):
                collector.lead()
            else:
                collector.stand_down()
            if stop.wait(max(collector.refresh_s, 0.1)):
                return

    def on_start(_server: Any) -> None:
        thread = threading.Thread(target=refresh_loop, name="fleetscope-fleet-metrics", daemon=True)
        thread.start()
        threads.append(thread)

    def on_stop(_server: Any) -> None:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
        source.release()

    server.on_start.append(on_start)
    server.on_stop.append(on_stop)


def _leads(leads: Callable[[], bool]) -> bool:
    """Whether to export now; a catalog that cannot say is a lost lead (its lock went with it)."""
    try:
        return leads()
    except Exception:
        log.warning("fleet metrics: leadership unknown (catalog unreachable?); not exporting")
        return False


@dataclass
class Snapshot:
    """Label tuples -> values of every family, as of one refresh."""

    recoverable: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    recoverable_joules: dict[tuple[str, ...], float] = field(default_factory=dict)
    recoverable_money: dict[tuple[str, ...], float] = field(default_factory=dict)
    open_findings: dict[tuple[str, str, str], int] = field(default_factory=dict)
    efficiency: dict[tuple[str, str], float] = field(default_factory=dict)
    mfu: dict[tuple[str, str, str, str], float] = field(default_factory=dict)  # measured only
    slurm_jobs: frozenset[str] = frozenset()  # their job_id is also their hpc_job


@dataclass
class Totals:
    """Cumulative GPU-hours per cluster, accounted through `through_s` (epoch seconds)."""

    through_s: float | None = None
    allocated_h: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    active_h: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    sm_h: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    energy_j: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # allocated
    idle_energy_j: dict[str, float] = field(default_factory=lambda: defaultdict(float))


COUNTED = ("allocated_h", "active_h", "sm_h", "energy_j", "idle_energy_j")  # Totals' counters


class FleetCollector(Collector):
    """The findings and GPU-hour families (see the module docstring); one instance per server."""

    def __init__(
        self,
        catalog: Engine,
        telemetry: Telemetry,
        *,
        window_s: float,
        top_jobs: int,
        refresh_s: float,
        lateness_s: float,
        default_interval_s: float,
        max_gap_s: float,
        clock: Callable[[], float] = time.time,
        background: bool = False,
        exporting: bool = True,
    ) -> None:
        self._catalog = catalog
        self._telemetry = telemetry
        self.exporting = exporting  # False: `collect` yields nothing (a gateway that does not lead)
        self._window_s = window_s
        self._top_jobs = top_jobs
        self.refresh_s = refresh_s
        self._background = background
        self._lateness_s = lateness_s
        self._default_interval_s = default_interval_s
        self._max_gap_s = max_gap_s
        self._clock = clock
        self._lock = threading.Lock()
        self._snapshot = Snapshot()
        self._totals = Totals()
        self._hours = HourRows()  # the window's hour rows kept between refreshes
        self._refreshed_at: float | None = None
        self._failures = 0

    def collect(self) -> Iterator[Metric]:
        if not self.exporting:
            return
        snapshot, totals = self._current()
        recoverable_labels = ["rule", "team", "job_id", "hpc_job", "cluster"]
        recoverable = GaugeMetricFamily(
            "fleetscope_recoverable_gpu_seconds",
            "GPU-seconds a fix would return, open findings in the metrics window (top jobs, rest "
            'in job_id="other"); max by (job_id) avoids counting a job once per rule.',
            labels=recoverable_labels,
        )
        slurm = snapshot.slurm_jobs
        for (rule, team, job, cluster), hours in sorted(snapshot.recoverable.items()):
            hpc_job = job if job in slurm else ""
            recoverable.add_metric([rule, team, job, hpc_job, cluster], round(hours * HOUR_S, 3))
        yield recoverable

        def with_hpc_job(key: tuple[str, ...]) -> tuple[str, ...]:  # the same series' labels
            rule, team, job, *rest = key
            return (rule, team, job, job if job in slurm else "", *rest)

        yield from energy_families(
            {with_hpc_job(k): v for k, v in snapshot.recoverable_joules.items()},
            {with_hpc_job(k): v for k, v in snapshot.recoverable_money.items()},
            recoverable_labels,
        )
        open_findings = GaugeMetricFamily(
            "fleetscope_findings_open",
            "Open findings (not acknowledged or suppressed) whose window ends in the metrics window.",
            labels=["rule", "severity", "team"],
        )
        for counted, count in sorted(snapshot.open_findings.items()):
            open_findings.add_metric(list(counted), count)
        yield open_findings
        efficiency = GaugeMetricFamily(
            "fleetscope_job_gpu_efficiency_ratio",
            "Active / allocated GPU-hours over the metrics window (top jobs, rest in "
            'job_id="other").',
            labels=["job_id", "hpc_job", "team"],
        )
        for (job, team), ratio in sorted(snapshot.efficiency.items()):
            efficiency.add_metric([job, job if job in slurm else "", team], round(ratio, 6))
        yield efficiency
        yield from prometheus_mfu.family(snapshot.mfu, slurm)
        for name, per_cluster, text in (
            ("fleetscope_allocated_gpu_seconds", totals.allocated_h, "Allocated GPU-seconds"),
            ("fleetscope_active_gpu_seconds", totals.active_h, "Active GPU-seconds"),
            ("fleetscope_sm_active_gpu_seconds", totals.sm_h, "SM-active GPU-seconds"),
        ):
            family = CounterMetricFamily(
                name, f"{text} accounted since the warehouse's first sample.", labels=["cluster"]
            )
            for cluster, hours in sorted(per_cluster.items()):
                family.add_metric([cluster], round(hours * HOUR_S, 3))
            yield family
        yield from energy_counters(totals.energy_j, totals.idle_energy_j)
        yield GaugeMetricFamily(
            "fleetscope_fleet_metrics_refreshed_timestamp_seconds",
            "When the findings and GPU-hour families above were last computed (0: never).",
            self._refreshed_at or 0.0,
        )
        yield CounterMetricFamily(
            "fleetscope_fleet_metrics_refresh_failures",
            "Refreshes of the findings and GPU-hour families that failed (previous values served).",
            self._failures,
        )

    def lead(self) -> None:
        """Refresh, then serve; a server that did not export until now starts a new term: fresh
        counters (their first refresh starts them, module docstring) and no failures yet."""
        if not self.exporting:
            with self._lock:
                self._snapshot, self._totals, self._hours = Snapshot(), Totals(), HourRows()
                self._refreshed_at, self._failures = None, 0
        self.refresh()
        self.exporting = True

    def stand_down(self) -> None:
        """Serve none of the families (another server exports them)."""
        if self.exporting:
            log.info("fleet metrics: another server exports the findings and GPU-hours now")
        self.exporting = False

    def refresh(self) -> None:
        """Recompute the snapshot and advance the counters; on failure keep the previous ones."""
        with self._lock:
            now = self._clock()
            try:
                self._refresh(now)
                self._refreshed_at = now
            except Exception:  # a scrape must never fail: serve the last snapshot
                self._failures += 1
                log.exception("fleet metrics: refresh failed; serving the previous snapshot")

    def _current(self) -> tuple[Snapshot, Totals]:
        """The snapshot to serve (refreshed here when stale, unless a thread refreshes it) and a
        copy of the counters (the refresh thread adds to them)."""
        stale = self._refreshed_at is None or self._clock() - self._refreshed_at >= self.refresh_s
        if stale and not self._background:
            self.refresh()
        with self._lock:
            totals = self._totals
            copy = Totals(totals.through_s)
            for name in COUNTED:
                getattr(copy, name).update(getattr(totals, name))
            return self._snapshot, copy

    def _refresh(self, now_s: float) -> None:
        from analyzers.accounting.usage import gpu_buckets, job_efficiency
        from analyzers.run.results import FindingStore
        from analyzers.run.window import Window

        since = datetime.fromtimestamp(now_s - self._window_s, tz=UTC)
        stored = [s for s in FindingStore(self._catalog).findings(since=since) if s.state == "open"]
        start_s = self._totals.through_s
        # The hours whose efficiency rows can still change (the whole window on a first refresh,
        # analyzers.prometheus_hours), and the counters' [through, now - lateness): one read.
        hours_from_s = self._hours.read_from_s(now_s, self._window_s, self._max_gap_s)
        read_from_s = min(hours_from_s, since.timestamp() if start_s is None else start_s)
        con = self._telemetry(read_from_s, now_s)
        totals = Totals(start_s)
        try:
            end_s = now_s - self._lateness_s
            if start_s is None:
                ((first_ms,),) = con.sql("SELECT epoch_ms(min(ts)) FROM gpu_samples").fetchall()
                start_s = first_ms / 1000.0 if first_ms is not None else end_s
            if end_s > start_s:
                buckets = gpu_buckets(
                    con,
                    Window(_utc(start_s), _utc(end_s), bucket_s=3600),
                    self._default_interval_s,
                    max_gap_s=self._max_gap_s,
                )
                allocated = buckets[buckets["job_id"].notna()]
                for cluster, group in allocated.groupby(allocated["cluster"].fillna("")):
                    totals.allocated_h[str(cluster)] += float(group["gpu_h"].sum())
                    totals.active_h[str(cluster)] += float(group["active_h"].sum())
                    totals.sm_h[str(cluster)] += float(group["sm_h"].sum())
                span = Window(_utc(start_s), _utc(end_s))
                energy_totals(con, span, self._default_interval_s, self._max_gap_s, totals)
                totals.through_s = end_s
            fresh = gpu_buckets(
                con,
                Window(_utc(hours_from_s), _utc(now_s), bucket_s=3600),
                self._default_interval_s,
                max_gap_s=self._max_gap_s,
                rollups=False,  # each hour read as a read of the whole window reads it
            )
            measured = prometheus_mfu.read(con, since, _utc(now_s))
        finally:
            con.close()
        hours = self._hours.updated(fresh, hours_from_s, now_s, self._window_s, self._lateness_s)
        per_job = job_efficiency(fresh if hours.rows is None else hours.rows)  # rows: always set
        teams, clusters, slurm = self._job_facts(stored, per_job)
        joules, money = recoverable_energy(stored, clusters, self._top_jobs)
        snapshot = Snapshot(
            slurm_jobs=frozenset(slurm),
            recoverable=recoverable_series(stored, clusters, self._top_jobs),
            recoverable_joules=joules,
            recoverable_money=money,
            open_findings=open_counts(stored),
            efficiency=efficiency_series(per_job, teams, self._top_jobs),
            mfu=prometheus_mfu.mfu_series(measured, teams, top_keys, self._top_jobs),
        )
        # Nothing is kept from a failed refresh: the next one reads the same hours again.
        self._snapshot, self._hours = snapshot, hours
        for name in COUNTED:
            for cluster, hours_h in getattr(totals, name).items():
                getattr(self._totals, name)[cluster] += hours_h
        self._totals.through_s = totals.through_s

    def _job_facts(
        self, stored: list[StoredFinding], per_job: Any
    ) -> tuple[dict[str, str], dict[str, str], set[str]]:
        """Team and cluster of every job: the catalog's jobs table, else findings and samples;
        and which jobs Slurm runs (their catalog record's scheduler)."""
        from sqlalchemy import select

        from warehouse.catalog.fleet import jobs

        teams: dict[str, str] = {}
        clusters: dict[str, str] = {
            str(j): str(c) for j, c in zip(per_job["job_id"], per_job["cluster"], strict=True)
        }
        for s in stored:
            if s.finding.job_id and s.finding.team:
                teams.setdefault(s.finding.job_id, s.finding.team)
        slurm: set[str] = set()
        wanted = sorted(set(clusters) | {s.finding.job_id for s in stored if s.finding.job_id})
        with self._catalog.connect() as conn:
            for start in range(0, len(wanted), 500):  # only the jobs in the window, in chunks
                chunk = wanted[start : start + 500]
                query = select(jobs.c.job_id, jobs.c.team, jobs.c.cluster, jobs.c.scheduler)
                rows = conn.execute(query.where(jobs.c.job_id.in_(chunk)))
                for job_id, team, cluster, scheduler in rows:
                    if team:
                        teams[job_id] = team
                    if cluster:
                        clusters[job_id] = cluster
                    if scheduler in SLURM_SCHEDULERS:
                        slurm.add(job_id)
        return teams, clusters, slurm


def _utc(epoch_s: float) -> datetime:
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=epoch_s)


def top_keys(hours: dict[str, float], n: int) -> set[str]:
    """The `n` keys with the most hours (ties broken by name, so a scrape is deterministic)."""
    return set(sorted(hours, key=lambda k: (-hours[k], k))[: max(n, 0)])


def recoverable_series(
    stored: list[StoredFinding], clusters: dict[str, str], top_jobs: int
) -> dict[tuple[str, str, str, str], float]:
    per_job: dict[str, float] = defaultdict(float)
    for s in stored:
        per_job[s.finding.job_id or ""] += s.finding.wasted_gpu_hours
    top = top_keys(per_job, top_jobs)
    out: dict[tuple[str, str, str, str], float] = defaultdict(float)
    for s in stored:
        f = s.finding
        job = f.job_id or ""
        label = job if job in top else OTHER
        out[(f.rule_id, f.team or "", label, clusters.get(job, ""))] += f.wasted_gpu_hours
    return dict(out)


def recoverable_energy(
    stored: list[StoredFinding], clusters: dict[str, str], top_jobs: int
) -> tuple[dict[tuple[str, ...], float], dict[tuple[str, ...], float]]:
    """`recoverable_series`'s series, valued in joules and money (analyzers.prometheus_energy)."""
    per_job: dict[str, float] = defaultdict(float)
    for s in stored:
        per_job[s.finding.job_id or ""] += s.finding.wasted_gpu_hours
    top = top_keys(per_job, top_jobs)

    def key(f: Finding) -> tuple[str, ...]:
        job = f.job_id or ""
        return (f.rule_id, f.team or "", job if job in top else OTHER, clusters.get(job, ""))

    return evidence_series([s.finding for s in stored], key)


def open_counts(stored: list[StoredFinding]) -> dict[tuple[str, str, str], int]:
    out: dict[tuple[str, str, str], int] = defaultdict(int)
    for s in stored:
        out[(s.finding.rule_id, str(s.finding.severity), s.finding.team or "")] += 1
    return dict(out)


def efficiency_series(
    per_job: Any, teams: dict[str, str], top_jobs: int
) -> dict[tuple[str, str], float]:
    """Active / known-active GPU-hours per top job; the rest pooled (ratio of sums) per team."""
    known = per_job["idle_h"] + per_job["active_h"]
    rows = [
        (str(job), float(k), float(a))
        for job, k, a in zip(per_job["job_id"], known, per_job["active_h"], strict=True)
        if float(k) > 0
    ]
    top = top_keys({job: k for job, k, _ in rows}, top_jobs)
    pooled: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for job, k, a in rows:
        key = (job if job in top else OTHER, teams.get(job, ""))
        pooled[key][0] += a
        pooled[key][1] += k
    return {key: a / k for key, (a, k) in pooled.items()}
