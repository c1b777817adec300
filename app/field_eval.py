"""`fleetscope eval --generator field`: the analyzers graded on simulator.field_fleet, a fleet
written from real jobs' published behaviour, not from the simulator or the rules (issue 13).

The path is the platform's own, end to end but in-process: each dcgm-exporter page (exposition
timestamps a day old) is parsed and normalized by the collector's code, jobs are attributed from
the exporter's `pod`/`namespace` or `hpc_job` labels only, owners come from pod labels (else the
namespace) and from Slurm prolog records, rows are published as warehouse segments with the
writer's arrival marks, and the scheduler (`analyzers.run.schedule.run_due`, the embedded path) finds
the day-old bucket by arrival at the next tick. Scored per job: a rule is a true positive when it
is the job's cause (`root`) and it held (as the finding or as a symptom in its evidence), a false
positive when it held and is neither the cause nor a listed symptom, a false negative when the
cause did not hold. Root-cause accuracy: the share of jobs with a cause whose top finding
(severity, then recoverable hours) names it. This module must never change the fleet's truth.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from app.evaluation import RuleScore

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from analyzers.findings import Finding
    from warehouse.catalog.fleet import Job

ORIGIN = datetime(2025, 3, 10, tzinfo=UTC)  # the replayed day; the agent's clock is a day later
AGENT_CLOCK = ORIGIN + timedelta(days=1, hours=6)


PEERS = {"R1": {"R1", "R3"}, "R3": {"R1", "R3"}}  # one cause (idle), seen over the job and live


@dataclass
class FieldReport:
    scores: dict[str, RuleScore]
    jobs: int
    root_correct: list[str] = field(default_factory=list)
    root_wrong: list[tuple[str, str, str]] = field(default_factory=list)  # job, want, got
    owners: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)
    rows: int = 0

    @property
    def root_accuracy(self) -> float:
        n = len(self.root_correct) + len(self.root_wrong)
        return len(self.root_correct) / n if n else 1.0

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.scores.values()) and self.root_accuracy >= 0.95


def _owners(tmp: Path) -> Path:
    """The Slurm prolog's records (deploy/slurm/prolog.sh writes one per job)."""
    from simulator.field_fleet import jobs

    job_dir = tmp / "slurm-jobs"
    job_dir.mkdir()
    for job in jobs():
        if "/" not in job.job_id:
            (job_dir / f"{job.job_id}.env").write_text(
                f"SLURM_JOB_ID={job.job_id}\nSLURM_JOB_USER={job.user}\n"
                f"SLURM_JOB_ACCOUNT={job.team}\nSLURM_JOB_PARTITION=gpu\n"
            )
    return job_dir


def write_field_warehouse(tmp: Path, engine: Engine, hours: float = 6.0) -> dict[str, Job]:
    """The field fleet stored as the platform stores it: exporter pages parsed, normalized and
    attributed by the collector's code, owners from pod labels and prolog records, rows published
    as segments under `tmp / "segments"` with the writer's arrival marks in `engine`'s catalog.
    Shared by the evaluation and by other analyzers' tests on this fleet (the sharing planner's)."""
    import pyarrow as pa

    from collector.owners import k8s_owner, read_job_record
    from fleetscope.attribution.labels import HpcJobLabel, PodLabels
    from fleetscope.attribution.resolver import AttributionResolver
    from fleetscope.contract import TABLES, conform
    from fleetscope.exposition import parse
    from fleetscope.normalize import normalize_samples
    from simulator.field_fleet import jobs, pages, step_rows
    from warehouse.catalog.fleet import Job, upsert_jobs
    from warehouse.prometheus.rows import rows_to_table
    from warehouse.storage.arrival_hook import ArrivalMarks
    from warehouse.storage.segments import SegmentStore
    from warehouse.storage.writer import Commit

    origin_ms = int(ORIGIN.timestamp() * 1000)
    resolver = AttributionResolver([HpcJobLabel(), PodLabels()])
    job_dir = _owners(tmp)
    segments = SegmentStore(tmp / "segments")
    marks = ArrivalMarks(engine, 86400, clock=lambda: AGENT_CLOCK)
    owners: dict[str, Job] = {}
    rows: list[dict[str, object]] = []
    seq = 0

    def publish(tables: dict[str, pa.Table]) -> None:
        nonlocal seq
        seq += 1
        written = {name: segments.write(name, t, seq) for name, t in tables.items()}
        segments.publish(seq, written)
        marks(Commit(seq, tables, []))

    for host, _ts_ms, text in pages(origin_ms, hours):
        readings = normalize_samples(
            parse(text).samples,
            ts_ms=int(AGENT_CLOCK.timestamp() * 1000),
            cluster="field",
            host=host,
        )
        resolver.resolve(readings)
        for reading in readings:
            job_id = reading.row.get("job_id")
            if not isinstance(job_id, str) or job_id in owners:
                continue
            ns = reading.row.get("namespace")
            owner = (
                k8s_owner(job_id, ns if isinstance(ns, str) else None, reading.labels)
                if reading.row.get("attribution") == "k8s"
                else read_job_record(job_dir, job_id)
            )
            if owner is not None:
                owners[job_id] = Job(job_id, user=owner.user, team=owner.team)
        rows += [r.row for r in readings]
        if len(rows) >= 20_000:
            publish({"gpu_samples": conform("gpu_samples", rows_to_table(rows))})
            rows = []
    if rows:
        publish({"gpu_samples": conform("gpu_samples", rows_to_table(rows))})
    steps = step_rows(origin_ms)
    columns = {f.name: [r.get(f.name) for r in steps] for f in TABLES["step_samples"]}
    step_table = pa.Table.from_pydict(columns, schema=TABLES["step_samples"])
    publish({"step_samples": conform("step_samples", step_table)})
    # users are owners too: the SDK's job record carries the user on Kubernetes
    for job in jobs():
        known = owners.get(job.job_id)
        owners[job.job_id] = Job(
            job.job_id, user=(known.user if known else None) or job.user,
            team=known.team if known else None,
        )  # fmt: skip
    with engine.begin() as conn:
        upsert_jobs(conn, list(owners.values()))
    return owners


def evaluate_field(hours: float = 6.0) -> FieldReport:
    from analyzers.run.results import FindingStore
    from analyzers.run.runner import Pipeline
    from analyzers.run.schedule import run_due
    from fleetscope.settings import load_settings
    from warehouse import catalog as warehouse_catalog
    from warehouse.read.reader import open_segments

    with tempfile.TemporaryDirectory(prefix="fleetscope-field-") as tmp_name:
        tmp = Path(tmp_name)
        engine = warehouse_catalog.connect(f"sqlite:///{tmp / 'catalog.sqlite'}")
        store = FindingStore(engine)
        owners = write_field_warehouse(tmp, engine, hours)
        settings = load_settings(env={"FLEETSCOPE_ANALYZERS_SKETCHES_DIR": str(tmp / "sk")})
        run_due(
            Pipeline.from_settings(settings),
            store,
            lambda: open_segments(tmp / "segments"),
            AGENT_CLOCK,
            bucket_s=86400,
            lateness_s=120.0,
            interval_s=60.0,
            reopen_max_age_s=7 * 86400.0,
        )
        found = [s.finding for s in store.findings(include_suppressed=True)]
        engine.dispose()
    report = score(found)
    report.owners = {j: (o.user, o.team) for j, o in sorted(owners.items())}
    return report


def score(found: list[Finding]) -> FieldReport:
    from analyzers.rules.causes import detected_rules
    from simulator.field_fleet import jobs

    fleet = jobs()
    held: dict[str, set[str]] = defaultdict(set)
    for job_id, rule in detected_rules(found):
        held[job_id or f"user:{rule}"].add(rule)
    for f in found:
        if f.job_id is None and f.user:
            held[f"user:{f.user}"].add(f.rule_id)
    scores: dict[str, RuleScore] = {}
    report = FieldReport(scores, len(fleet))
    for job in fleet:
        got = held.get(job.job_id, set())
        want = {job.root} if job.root else set()
        for rule in want | got:
            s = scores.setdefault(rule, RuleScore(rule))
            if rule in want and rule in got:
                s.tp += 1
            elif rule in want:
                s.fn += 1
                s.fn_jobs.append(job.job_id)
            elif rule not in job.may:
                s.fp += 1
                s.fp_jobs.append(job.job_id)
        if job.root:
            mine = [f for f in found if f.job_id == job.job_id]
            top = max(mine, key=lambda f: (f.severity.rank, f.wasted_gpu_hours), default=None)
            if top is not None and top.rule_id in PEERS.get(job.root, {job.root}):
                report.root_correct.append(job.job_id)
            else:
                report.root_wrong.append((job.job_id, job.root, top.rule_id if top else "-"))
    for key, rules in held.items():
        if key.startswith("user:"):
            for rule in rules:  # no user of this fleet holds > 50 GPU-hours: R4 never true
                s = scores.setdefault(rule, RuleScore(rule))
                s.fp += 1
                s.fp_jobs.append(key)
    return report


def render_field(report: FieldReport) -> str:
    out = [
        f"field fleet (simulator/field_fleet.py): {report.jobs} jobs, day-old replay, "
        "attribution by exporter labels only",
        f"{'rule':<5} {'TP':>4} {'FP':>4} {'FN':>4} {'precision':>10} {'recall':>8}",
    ]
    for rule, s in sorted(report.scores.items()):
        p = "-" if s.precision is None else f"{s.precision:.3f}"
        r = "-" if s.recall is None else f"{s.recall:.3f}"
        flag = "" if (s.precision or 1) >= 0.95 and (s.recall or 1) >= 0.95 else "   <- below"
        out.append(f"{rule:<5} {s.tp:>4} {s.fp:>4} {s.fn:>4} {p:>10} {r:>8}{flag}")
        if s.fp_jobs:
            out.append(f"      false positives: {', '.join(s.fp_jobs[:5])}")
        if s.fn_jobs:
            out.append(f"      missed: {', '.join(s.fn_jobs[:5])}")
    out.append(
        f"root-cause accuracy: {report.root_accuracy:.3f} "
        f"({len(report.root_correct)}/{len(report.root_correct) + len(report.root_wrong)})"
        + "".join(f"\n      {j}: cause {w}, top finding {g}" for j, w, g in report.root_wrong)
    )
    owners = ", ".join(f"{j}={t or '-'}/{u or '-'}" for j, (u, t) in report.owners.items())
    out.append(f"owners (team/user): {owners}")
    out.append(f"targets: precision, recall and root-cause accuracy >= 0.95: "
               f"{'PASS' if report.passed else 'FAIL'}")  # fmt: skip
    return "\n".join(out)
