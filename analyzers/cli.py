"""Registers the analyzers' `fleetscope` commands (see app.cli); heavy imports stay inside
the handlers.

    analyzers        the registered analyzers, their rules and thresholds
    analyze          one scheduler tick in this process: every window owed since the watermark
    backfill         re-run whole buckets of a past range (here, or enqueued with --celery);
                     buckets retention retired are skipped unless --rerun-retired
    opportunities    the fleet ranking: recoverable GPU-hours by rule and group, top offenders
    job              one job's efficiency summary and findings
    findings         list stored findings; ack / suppress / reopen them
"""

from __future__ import annotations

import argparse
import json
import re
from dataclasses import asdict, fields
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from fleetscope.errors import ConfigError, NotFoundError

if TYPE_CHECKING:
    import duckdb

    from analyzers.run.backfill import BackfillPlan, RetiredBucket
    from analyzers.run.results import FindingStore
    from analyzers.run.runner import WindowResult
    from fleetscope.settings import Settings

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> timedelta:
    """'7d', '12h', '30m', '90s', '2w' -> timedelta; anything else is a ConfigError."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text)
    if not match:
        raise ConfigError(f"duration {text!r}: expected a number and a unit (s, m, h, d, w)")
    return timedelta(seconds=float(match.group(1)) * _UNITS[match.group(2)])


def parse_time(text: str) -> datetime:
    """ISO 8601 date or time; naive values are taken as UTC."""
    try:
        ts = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ConfigError(f"time {text!r}: expected ISO 8601, e.g. 2025-03-03T00:00:00Z") from exc
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def _store(settings: Settings) -> FindingStore:
    from analyzers.run.results import FindingStore
    from warehouse import catalog
    from warehouse.storage.paths import WarehousePaths

    return FindingStore(catalog.connect(WarehousePaths.from_settings(settings).catalog_url))


def _telemetry(settings: Settings) -> duckdb.DuckDBPyConnection:
    from warehouse.read.reader import connect

    return connect(settings)


def _job_telemetry(settings: Settings, job_id: str) -> duckdb.DuckDBPyConnection:
    """The job's telemetry in either mode (warehouse.read.window_reader.open_job)."""
    from warehouse.read.window_reader import open_job

    return open_job(settings, job_id)


def cmd_analyzers(args: argparse.Namespace, settings: Settings) -> int:
    from analyzers.run.runner import Pipeline

    if args.skipped:
        skipped = _store(settings).skipped_buckets()
        for partition, bucket, arrival in skipped:
            print(
                f"{bucket.isoformat()}  partition {partition}  data arrived {arrival.isoformat()}"
            )
        if not skipped:
            print("no bucket skipped: every late arrival was analysed")
        return 0

    for a in Pipeline.from_settings(settings).analyzers:
        th = ", ".join(f"{f.name}={getattr(a.thresholds, f.name)}" for f in fields(a.thresholds))
        print(f"{a.name:<20} {','.join(a.rule_ids):<12} reads {','.join(a.inputs)}\n    {th}")
    return 0


def cmd_analyze(args: argparse.Namespace, settings: Settings) -> int:
    from analyzers.run.runner import Pipeline
    from analyzers.run.schedule import (
        reopen_bound_s,
        run_due,
        schedule_time,
        store_percentiles,
        store_sharing_plan,
    )
    from analyzers.sharing.stored import PlanStep

    if settings.server.mode == "fleet":
        raise ConfigError(
            "fleet mode: due windows are analysed by the Celery workers (beat sends "
            "`fleetscope.tick` every scheduler.interval_s); run here, `analyze` would read no "
            "telemetry, replace the due windows' findings with none and move the watermark past "
            "them"
        )
    interval_s = settings.scheduler.interval_s
    at = parse_time(args.at) if args.at else datetime.now(UTC)
    store = _store(settings)
    results = run_due(
        Pipeline.from_settings(settings),
        store,
        lambda: _telemetry(settings),
        schedule_time(at, interval_s),
        bucket_s=settings.analyzers.bucket_s,
        lateness_s=settings.analyzers.lateness_s,
        interval_s=interval_s,
        reopen_max_age_s=reopen_bound_s(settings),
    )
    step = PlanStep.from_settings(settings)
    stored = store_sharing_plan(store, lambda _s, _e: _telemetry(settings), results, step)
    kept = store_percentiles(store, settings, lambda _s, _e: _telemetry(settings), results)
    code = _report(results)
    if stored is not None:
        print(f"sharing plan stored: {stored.start.isoformat()} .. {stored.end.isoformat()}")
    if kept is not None:
        print(f"fleet percentiles stored: {kept.start.isoformat()} .. {kept.end.isoformat()}")
    return code


def _report(results: list[Any]) -> int:
    for r in results:
        print(_result_text(r))
    if not results:
        print("nothing due: every window up to the watermark is analyzed")
    return 1 if any(r.errors for r in results) else 0


def _result_text(r: WindowResult) -> str:
    """A window's findings, and each analyzer that failed on it, one line each."""
    lines = [
        f"{r.window.start.isoformat()} .. {r.window.end.isoformat()}  "
        f"p{r.window.partition}: {len(r.findings)} finding(s)"
    ]
    lines += [f"  analyzer {name} failed: {error}" for name, error in r.errors.items()]
    return "\n".join(lines)


def cmd_backfill(args: argparse.Namespace, settings: Settings) -> int:
    from analyzers.run.backfill import plan_backfill
    from analyzers.run.schedule import backfill_windows

    start, end = parse_time(args.start), parse_time(args.end)
    bucket_s = settings.analyzers.bucket_s
    if settings.server.mode == "fleet" and not args.celery:
        raise ConfigError(
            "fleet mode: run `fleetscope backfill` with --celery (workers read the Iceberg tables "
            "per cluster); run here, it would read no telemetry and replace the range's findings "
            "with none"
        )
    if args.celery:
        from analyzers.run.celery_app import make_app, window_slices

        windows = backfill_windows(start, end, bucket_s, window_slices(settings))
        planned = plan_backfill(settings, windows, rerun_retired=args.rerun_retired)
        # Sent through an app of this command's settings: the module's own `app` reads the
        # environment's, so `--config` named a broker the tasks never went to.
        sender = make_app(settings)
        for w in planned.windows:
            sender.send_task(
                "fleetscope.analyze_window",
                args=[w.start.isoformat(), w.end.isoformat(), w.partition, w.partitions],
            )
        for _, line in _retired_lines(planned):
            print(line)
        print(_backfill_summary(planned, f"enqueued ({len(planned.windows)} window task(s))"))
        return 0
    from analyzers.run.results import CatalogJobs
    from analyzers.run.runner import Pipeline

    planned = plan_backfill(
        settings, backfill_windows(start, end, bucket_s), rerun_retired=args.rerun_retired
    )
    pipeline, store = Pipeline.from_settings(settings), _store(settings)
    conn = _telemetry(settings)
    try:
        results = [pipeline.run(conn, w, CatalogJobs(store.engine), store) for w in planned.windows]
    finally:
        conn.close()
    lines = _retired_lines(planned)
    lines += [(r.window.start, _result_text(r)) for r in results]
    for _, text in sorted(lines, key=lambda line: line[0]):  # stable: a re-run's note first
        print(text)
    print(_backfill_summary(planned, "re-run"))
    return 1 if any(r.errors for r in results) else 0


def _retired_lines(planned: BackfillPlan) -> list[tuple[datetime, str]]:
    """Each retired bucket's line (skipped, or re-run anyway, and why), by start. Skipped
    buckets in a row retired for the same reason share one line: a month-long range before
    retention's cut-off is one line, not thirty."""
    if planned.rerun_retired:
        return [
            (b.start, _retired_line([b], "re-run anyway (--rerun-retired)"))
            for b in planned.retired
        ]
    runs: list[list[RetiredBucket]] = []
    for bucket in planned.retired:
        last = runs[-1][-1] if runs else None
        reason = _reason(bucket)
        if last is not None and last.end == bucket.start and reason and reason == _reason(last):
            runs[-1].append(bucket)
        else:
            runs.append([bucket])
    return [(run[0].start, _retired_line(run, "skipped, findings kept")) for run in runs]


def _reason(bucket: RetiredBucket) -> str | None:
    """The one reason all of a bucket's days give (None when they differ)."""
    reasons = {d.why for d in bucket.days}
    return reasons.pop() if len(reasons) == 1 else None


def _retired_line(run: list[RetiredBucket], done: str) -> str:
    span = f"{run[0].start.isoformat()} .. {run[-1].end.isoformat()}"
    if len(run) == 1:
        return f"{span}  {done}: raw samples retired ({run[0].why()})"
    days = f"{run[0].days[0].day.isoformat()} to {run[-1].days[-1].day.isoformat()}"
    return f"{span}  {len(run)} buckets {done}: raw samples retired ({days}: {_reason(run[0])})"


def _backfill_summary(planned: BackfillPlan, done: str) -> str:
    """The command's last line: buckets run or enqueued, and the retired ones skipped or not."""
    buckets = len({w.start for w in planned.windows})
    summary = f"backfill: {buckets} bucket(s) {done}"
    retired = len(planned.retired)
    if retired and planned.rerun_retired:
        return f"{summary}, {retired} of them on what is left after retention (--rerun-retired)"
    if retired:
        return (
            f"{summary}, {retired} skipped: retention retired their raw samples, their findings "
            "are kept (--rerun-retired re-runs them on what is left)"
        )
    return summary


def cmd_opportunities(args: argparse.Namespace, settings: Settings) -> int:
    from analyzers.reports.ranking import rank, render
    from analyzers.run.results import CatalogJobs

    store = _store(settings)
    end = parse_time(args.end) if args.end else datetime.now(UTC)
    since = end - parse_duration(args.window)
    found = [s.finding for s in store.findings(since=since, until=end)]
    report = rank(found, by=args.by, catalog=CatalogJobs(store.engine), top=args.top)
    if args.json:
        payload = {
            "window": args.window,
            "total_gpu_hours": report.total_gpu_hours,
            "total_kwh": report.total_kwh,
            "total_money": report.total_money,  # null: no price set
            "currency": report.currency,
            **{
                key: [
                    {
                        "key": x.key,
                        "gpu_hours": x.gpu_hours,
                        "kwh": x.kwh,
                        "money": x.money,
                        "findings": x.findings,
                        "jobs": sorted(x.jobs),
                        "rules": dict(x.rules),
                    }
                    for x in getattr(report, key)
                ]
                for key in ("by_rule", "by_group", "top_jobs")
            },
        }
        print(json.dumps(payload, indent=2))
    else:
        print(render(report, args.window))
    return 0


def cmd_job(args: argparse.Namespace, settings: Settings) -> int:
    from analyzers.accounting.cost import Prices
    from analyzers.plain import plain, to_text, without_gpus
    from analyzers.reports.job import render, summarize
    from analyzers.run.results import CatalogJobs

    store = _store(settings)
    found = [s.finding for s in store.findings(job_id=args.job)]
    info = CatalogJobs(store.engine).get(args.job)
    conn = _job_telemetry(settings, args.job)
    try:
        summary = summarize(
            conn, args.job, Prices.from_settings(settings), info.team if info else None
        )
    except NotFoundError:
        if not found or args.json:
            raise
        # a CPU-only process (the demo's PyTorch job): no GPU summary, but its findings
        print(f"Job {args.job}: no GPU samples (a CPU-only process); findings from its steps:")
        print("\n".join(to_text(without_gpus(plain(f))) for f in found))
        return 0
    finally:
        conn.close()
    summary.findings = found
    if args.json:
        data = asdict(summary)
        data["findings"] = [f.to_dict() for f in summary.findings]
        print(json.dumps(data, indent=2, default=str))
    else:
        from analyzers.reports.slurm_job import jobstats_header

        header = jobstats_header(args.job, summary)  # on a Slurm host: what jobstats prints
        print(render(summary) if header is None else f"{header}\n\n{render(summary)}")
    return 0


def cmd_findings(args: argparse.Namespace, settings: Settings) -> int:
    store = _store(settings)
    if args.ack or args.reopen:
        store.set_state(args.ack or args.reopen, "acknowledged" if args.ack else "open")
        return 0
    if args.suppress:
        scope, _, value = args.suppress.partition("=")
        if scope not in ("rule", "job", "user", "team") or not value:
            raise ConfigError("--suppress takes rule=ID, job=ID, user=NAME or team=NAME")
        sid = store.suppress(scope, value, rule_id=args.rule, reason=args.reason)
        print(f"suppression {sid}: {scope}={value}" + (f" for {args.rule}" if args.rule else ""))
        return 0
    since = datetime.now(UTC) - parse_duration(args.window) if args.window else None
    rows = store.findings(
        since=since, job_id=args.job, rule_id=args.rule, include_suppressed=args.all
    )
    for s in rows:
        f = s.finding
        print(
            f"{f.finding_id}  {f.rule_id:<4} {s.state:<12} {f.wasted_gpu_hours:>8.2f} GPU-h  "
            f"{f.job_id or '-'}  {f.title}"
        )
    return 0


def register(subparsers: Any) -> None:
    """Every command of this module (each is also its own entry point, app/commands/)."""
    register_analyzers(subparsers)
    register_analyze(subparsers)
    register_backfill(subparsers)
    register_opportunities(subparsers)
    register_job(subparsers)
    register_findings(subparsers)


def register_analyzers(subparsers: Any) -> None:
    p = subparsers.add_parser("analyzers", help="List registered analyzers, rules, thresholds.")
    p.add_argument(
        "--skipped",
        action="store_true",
        help="list buckets whose late data was older than analyzers.reopen_max_age_s (not run)",
    )
    p.set_defaults(handler=cmd_analyzers)


def register_analyze(subparsers: Any) -> None:
    p = subparsers.add_parser("analyze", help="Run the analyzer windows that are due, here.")
    p.add_argument("--at", help="schedule time (ISO 8601; default: now)")
    p.set_defaults(handler=cmd_analyze)


def register_backfill(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "backfill",
        help="Re-run whole analysis buckets of a past range.",
        description=(
            "Re-run whole analysis buckets of a past range; each re-run replaces its bucket's "
            "findings. A bucket whose raw samples retention retired (any day of it) is skipped "
            "and its findings kept: only roll-ups and late rows are left to read."
        ),
    )
    p.add_argument("--start", required=True, help="ISO 8601 start")
    p.add_argument("--end", required=True, help="ISO 8601 end")
    p.add_argument(
        "--celery",
        action="store_true",
        help="enqueue window tasks for workers (required in fleet mode)",
    )
    p.add_argument(
        "--rerun-retired",
        action="store_true",
        help="re-run buckets whose raw samples retention retired as well, replacing their "
        "findings with those of what is left (none, or the late rows')",
    )
    p.set_defaults(handler=cmd_backfill)


def register_opportunities(subparsers: Any) -> None:
    p = subparsers.add_parser("opportunities", help="Recoverable GPU-hours, ranked fleet-wide.")
    p.add_argument("--window", default="7d", help="how far back (e.g. 7d, 24h)")
    p.add_argument("--end", help="window end (ISO 8601; default: now)")
    p.add_argument("--by", choices=["team", "user", "job", "model"], default="team")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_opportunities)


def register_job(subparsers: Any) -> None:
    p = subparsers.add_parser("job", help="One job's efficiency summary and findings.")
    p.add_argument("job", help="job id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_job)


def register_findings(subparsers: Any) -> None:
    p = subparsers.add_parser("findings", help="List findings; acknowledge or suppress them.")
    p.add_argument("--job")
    p.add_argument("--rule", help="filter by rule (with --suppress: suppress only this rule)")
    p.add_argument("--window", help="only findings ending in the last DURATION")
    p.add_argument("--all", action="store_true", help="include suppressed findings")
    p.add_argument("--ack", metavar="FINDING_ID")
    p.add_argument("--reopen", metavar="FINDING_ID")
    p.add_argument(
        "--suppress", metavar="SCOPE=VALUE", help="rule=R2, job=ID, user=NAME, team=NAME"
    )
    p.add_argument("--reason")
    p.set_defaults(handler=cmd_findings)
