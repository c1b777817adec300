"""`fleetscope eval`: analyzer quality measured against the simulator's ground truth.

The simulator (simulator) plans a fleet of jobs from its scenarios (healthy, idle
allocation, data-loader stall, CPU and I/O bottlenecks, low SM, no tensor cores, memory-bound,
small batch, an inference service on whole GPUs, a memory leak, step-time outliers, straggler,
thermal throttling, XID; 8-GPU jobs fragmented over two hosts; with checkpoint loads at start,
periodic evaluation, MIG slices, jobs that move hosts, missing scrapes, jobs without profiling
fields) and writes, per job, the rules that should fire and the GPU-hours each wastes
(simulator/truth.py), and per user whether R4 should fire (simulator/users.py). Here the batch tables go
through the real pipeline: published as warehouse segments, read back through
`warehouse.read.reader`, analyzed by every registered analyzer, landed in a real catalog, read back by
the store. Per rule: precision and recall over jobs, and the relative error of the summed wasted
GPU-hours over the jobs both agree on.

Truth is per whole job, so only jobs that start and end inside the generated range are scored, and
the analysis bucket spans the whole range (one identity bucket per job). R4 is scored per user
over the same range (every job in it counts, with its part inside), skipping users whose verdict
the simulator calls ambiguous (counted in `ambiguous_users`). A rule the fleet never makes true
and no analyzer reports is listed as not simulated. This module must never change the simulator's
truth.
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from analyzers.findings import Finding

TARGET_PRECISION = 0.95
TARGET_RECALL = 0.95
TARGET_WASTE_ERROR = 0.10

# The cause a person names for each simulated scenario (its design, simulator/
# scenarios.py); R1 and R3 are one cause (idle), seen over the job and live.
SCENARIO_ROOT: dict[str, frozenset[str]] = {
    "idle_allocation": frozenset({"R1", "R3"}),
    "data_loader_stall": frozenset({"P1"}),
    "cpu_bottleneck": frozenset({"R9"}),
    "io_bottleneck": frozenset({"R10"}),
    "low_sm_activity": frozenset({"R6"}),
    "memory_bound": frozenset({"R8"}),
    "no_tensor_cores": frozenset({"R7"}),
    "oversized_gpu": frozenset({"R5"}),
    "small_batch": frozenset({"R12"}),
    "memory_leak": frozenset({"R13"}),
    "step_outliers": frozenset({"P2"}),
    "straggler": frozenset({"R14"}),
    "thermal_throttling": frozenset({"R16"}),
    "xid_errors": frozenset({"R17"}),
}


@dataclass
class RuleScore:
    rule_id: str
    tp: int = 0
    fp: int = 0
    fn: int = 0
    truth_hours: float = 0.0
    found_hours: float = 0.0
    fp_jobs: list[str] = field(default_factory=list)
    fn_jobs: list[str] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    @property
    def waste_error(self) -> float | None:
        if self.truth_hours <= 0:
            return None
        return abs(self.found_hours - self.truth_hours) / self.truth_hours

    @property
    def passed(self) -> bool:
        p, r, e = self.precision, self.recall, self.waste_error
        return (
            (p is None or p >= TARGET_PRECISION)
            and (r is None or r >= TARGET_RECALL)
            and (e is None or e <= TARGET_WASTE_ERROR)
        )


@dataclass
class EvalReport:
    scores: dict[str, RuleScore]
    jobs: int
    scenarios: dict[str, int]
    rows: int
    seconds: dict[str, float]
    not_simulated: list[str]
    users: int = 0
    ambiguous_users: list[str] = field(default_factory=list)
    root_correct: int = 0  # jobs whose top finding names their scenario's cause (issue 13)
    root_wrong: list[str] = field(default_factory=list)

    @property
    def root_accuracy(self) -> float | None:
        n = self.root_correct + len(self.root_wrong)
        return self.root_correct / n if n else None

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.scores.values())


def evaluate(hosts: int = 8, hours: float = 12.0, seed: int = 7, step_s: int = 10) -> EvalReport:
    from analyzers.base import JobInfo, StaticJobCatalog, load_analyzers, rule_registry
    from analyzers.run.results import FindingStore
    from analyzers.run.runner import Pipeline
    from analyzers.run.window import Window
    from fleetscope.settings import load_settings
    from simulator.fleet import FleetSpec
    from simulator.sim import FleetSimulator
    from warehouse import catalog as warehouse_catalog
    from warehouse.read.reader import open_segments
    from warehouse.storage.segments import SegmentStore

    seconds: dict[str, float] = {}
    began = time.perf_counter()
    origin = 1_740_960_000  # 2025-03-03T00:00:00Z: fixed, so a seed always gives the same fleet
    sim = FleetSimulator(
        FleetSpec(hosts=hosts, seed=seed), origin_s=origin, horizon_s=int(hours * 3600)
    )
    records = sim.truth_records()
    g0 = int(min(r["start_ts"] for r in records)) // step_s * step_s
    g1 = origin + int(hours * 3600)
    scored = [r for r in records if r["start_ts"] >= g0 and r["end_ts"] <= g1]
    with tempfile.TemporaryDirectory(prefix="fleetscope-eval-") as tmp:
        store_root = Path(tmp) / "segments"
        segments = SegmentStore(store_root)
        rows = 0
        for seq, chunk in enumerate(sim.iter_tables(g0, g1, step_s), start=1):
            written = {name: segments.write(name, table, seq) for name, table in chunk.items()}
            segments.publish(seq, written)
            rows += chunk["gpu_samples"].num_rows
        seconds["generate"] = time.perf_counter() - began

        catalog = StaticJobCatalog(
            JobInfo(r["job_id"], r["user"], r["team"], r["name"], r["model"])
            for r in sim.job_records()
        )
        engine = warehouse_catalog.connect(f"sqlite:///{Path(tmp) / 'catalog.sqlite'}")
        store = FindingStore(engine)
        # sketches go to the temporary folder too, never to the working directory's data_dir;
        # their tiers and retention are the deployment's defaults
        sketches_dir = str(Path(tmp) / "sketches")
        settings = load_settings(env={"FLEETSCOPE_ANALYZERS_SKETCHES_DIR": sketches_dir})
        pipeline = Pipeline.from_settings(settings)
        window = Window(datetime.fromtimestamp(g0, UTC), datetime.fromtimestamp(g1, UTC))
        t = time.perf_counter()
        conn = open_segments(store_root)
        try:
            result = pipeline.run(conn, window, catalog, store)
        finally:
            conn.close()
        seconds["analyze"] = time.perf_counter() - t
        if result.errors:
            from analyzers.run.runner import AnalyzerFailedError

            raise AnalyzerFailedError(f"analyzers failed during eval: {result.errors}")
        found = [s.finding for s in store.findings(include_suppressed=True)]
        engine.dispose()
    user_truth = sim.user_truth_records(g0, g1)

    implemented = set(rule_registry(load_analyzers()))
    by_job: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for f in found:
        if f.job_id:
            by_job[f.job_id][f.rule_id] += f.wasted_gpu_hours
            # a symptom folded into its root cause (analyzers.rules.causes) still held: it is scored
            for s in f.evidence.get("symptoms", ()) or ():
                by_job[f.job_id][str(s["rule_id"])] += float(s["wasted_gpu_hours"])
    truth_rules = {rule for r in scored for rule in r["rules"]}
    scores = {rule: RuleScore(rule) for rule in sorted(truth_rules | implemented)}
    scored_ids = {r["job_id"] for r in scored}
    for r in scored:
        want = r["wasted_gpu_hours"]
        got = by_job.get(r["job_id"], {})
        for rule, score in scores.items():
            if rule in want and rule in got:
                score.tp += 1
                score.truth_hours += want[rule]
                score.found_hours += got[rule]
            elif rule in want:
                score.fn += 1
                score.fn_jobs.append(r["job_id"])
            elif rule in got:
                score.fp += 1
                score.fp_jobs.append(r["job_id"])
    ambiguous = _score_users(scores, user_truth, found)
    root_correct, root_wrong = _score_roots(scored, found)
    not_simulated = sorted(rule for rule, s in scores.items() if s.tp + s.fn == 0 and s.fp == 0)
    scenarios: dict[str, int] = defaultdict(int)
    for r in scored:
        scenarios[r["scenario"]] += 1
    _ = scored_ids
    return EvalReport(
        scores,
        len(scored),
        dict(scenarios),
        rows,
        seconds,
        not_simulated,
        users=len(user_truth) - len(ambiguous),
        ambiguous_users=ambiguous,
        root_correct=root_correct,
        root_wrong=root_wrong,
    )


def _score_roots(scored: list[dict[str, Any]], found: list[Finding]) -> tuple[int, list[str]]:
    """Jobs whose top finding (severity, then recoverable hours) names their scenario's cause;
    only jobs whose truth holds that cause are judged."""
    by_job: dict[str, list[Finding]] = defaultdict(list)
    for f in found:
        if f.job_id:
            by_job[f.job_id].append(f)
    correct, wrong = 0, []
    for r in scored:
        root = SCENARIO_ROOT.get(r["scenario"])
        if not root or not root & set(r["rules"]):
            continue
        mine = by_job.get(r["job_id"], [])
        top = max(mine, key=lambda f: (f.severity.rank, f.wasted_gpu_hours), default=None)
        if top is not None and top.rule_id in root:
            correct += 1
        else:
            wrong.append(f"{r['job_id']} ({r['scenario']}: top {top.rule_id if top else '-'})")
    return correct, wrong


USER_RULES = ("R4",)  # rules whose findings are about a user, not a job


def _score_users(
    scores: dict[str, RuleScore], truth: list[dict[str, Any]], found: list[Finding]
) -> list[str]:
    """Score the per-user rules over users (truth: users.py); returns the users left unscored."""
    ambiguous = sorted(u["user"] for u in truth if u["ambiguous"])
    for rule in USER_RULES:
        score = scores.setdefault(rule, RuleScore(rule))
        got = {f.user for f in found if f.rule_id == rule and f.user}
        known = {u["user"] for u in truth}
        for u in truth:
            if u["ambiguous"]:
                continue
            want = rule in u["rules"]
            if want and u["user"] in got:
                score.tp += 1
            elif want:
                score.fn += 1
                score.fn_jobs.append(f"user:{u['user']}")
            elif u["user"] in got:
                score.fp += 1
                score.fp_jobs.append(f"user:{u['user']}")
        for user in sorted(got - known):
            score.fp += 1
            score.fp_jobs.append(f"user:{user}")
    return ambiguous


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:.1f} %" if pct else f"{value:.3f}"


def _catalog_order(rule: str) -> tuple[int, int, str]:
    """R1..R17, then P1..P3, as rules.md lists them."""
    digits = rule[1:]
    return (0 if rule.startswith("R") else 1, int(digits) if digits.isdigit() else 0, rule)


def render(report: EvalReport) -> str:
    out = [
        f"scored jobs: {report.jobs} ({', '.join(f'{k} {v}' for k, v in sorted(report.scenarios.items()))})",
        f"gpu_samples rows: {report.rows:,}; generate {report.seconds.get('generate', 0):.1f} s, "
        f"analyze {report.seconds.get('analyze', 0):.1f} s",
        "",
        f"{'rule':<5} {'TP':>4} {'FP':>4} {'FN':>4} {'precision':>10} {'recall':>8} "
        f"{'truth GPU-h':>12} {'found GPU-h':>12} {'error':>8}",
    ]
    for rule, s in sorted(report.scores.items(), key=lambda kv: _catalog_order(kv[0])):
        if rule in report.not_simulated:
            continue
        out.append(
            f"{rule:<5} {s.tp:>4} {s.fp:>4} {s.fn:>4} {_fmt(s.precision):>10} {_fmt(s.recall):>8} "
            f"{s.truth_hours:>12.2f} {s.found_hours:>12.2f} {_fmt(s.waste_error, True):>8}"
            + ("" if s.passed else "   <- below target")
        )
        if s.fp_jobs:
            out.append(f"      false positives: {', '.join(s.fp_jobs[:5])}")
        if s.fn_jobs:
            out.append(f"      missed: {', '.join(s.fn_jobs[:5])}")
    out += [
        "",
        f"R4 is scored over users: {report.users} users"
        + (
            f" ({len(report.ambiguous_users)} ambiguous, not scored: "
            f"{', '.join(report.ambiguous_users)})"
            if report.ambiguous_users
            else ""
        ),
        "root-cause accuracy (top finding names the scenario's cause): "
        + (
            "-"
            if report.root_accuracy is None
            else f"{report.root_accuracy:.3f} ({report.root_correct}/"
            f"{report.root_correct + len(report.root_wrong)})"
        )
        + "".join(f"\n      {w}" for w in report.root_wrong[:5]),
        "not simulated (never true in the simulated fleet): "
        + (", ".join(report.not_simulated) or "none"),
        f"targets: precision and recall >= {TARGET_PRECISION}, wasted GPU-hours within "
        f"{TARGET_WASTE_ERROR:.0%}: {'PASS' if report.passed else 'FAIL'}",
    ]
    return "\n".join(out)
