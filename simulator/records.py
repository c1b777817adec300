"""Per-job JSON records: catalog metadata (what a scheduler hook posts) and ground truth.

What it is for: `job_record` is the body element of `POST {ingest}/v1/jobs` (a JSON list of
these): job_id, cluster, user, team, name, model, scheduler, start_ts, end_ts (Unix seconds;
end_ts null while the job runs) and gpus (one entry per GPU or MIG slice and placement).
`truth_record` adds the scenario, the rules that should fire and the wasted GPU-hours per rule
with the formula used (truth.RULES), written one per line to truth.jsonl; `truth_records` adds
the verdicts of the rules that compare a job with others (simulator.rule_scenarios' fleet
truths), judged over the records' jobs together.

Must never: touch files or the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simulator.fleet import Fleet, Job
from simulator.truth import RULES, job_stats, verdicts

__all__ = ["job_record", "truth_record", "truth_records"]


def job_record(fleet: Fleet, job: Job, *, running: bool = False) -> dict[str, Any]:
    """The catalog's view of a job; `running` leaves end_ts null, as a prolog hook knows no end."""
    gpus = [
        {
            "host": fleet.hosts[p.host].name,
            "gpu_index": fleet.units[u].gpu_index,
            "gpu_uuid": fleet.units[u].uuid,
            "mig_profile": fleet.units[u].mig_profile,
            "mig_instance_id": fleet.units[u].mig_instance_id,
            "start_ts": float(p.start_s),
            "end_ts": None if running else float(p.end_s),
        }
        for p in job.placements
        for u in p.units
    ]
    return {
        "job_id": job.job_id,
        "cluster": job.cluster,
        "user": job.user,
        "team": job.team,
        "name": job.name,
        "model": job.model,
        "scheduler": job.scheduler,
        "start_ts": float(job.start_s),
        "end_ts": None if running else float(job.end_s),
        "gpus": gpus,
    }


def truth_record(fleet: Fleet, job: Job) -> dict[str, Any]:
    """What should be found about the job, and why (see truth.py for the conventions)."""
    stats = job_stats(fleet.shape(job))
    waste = verdicts(stats)
    return {
        **job_record(fleet, job),
        "scenario": job.scenario.name,
        "description": job.scenario.description,
        "hosts": sorted({fleet.hosts[p.host].name for p in job.placements}),
        "n_gpus": job.n_gpus,
        "gpu_hours": round(stats.gpu_hours, 6),
        "rules": sorted(waste),
        "intended_rules": list(job.scenario.intended),
        "wasted_gpu_hours": {rule: round(hours, 6) for rule, hours in sorted(waste.items())},
        "how": {rule: RULES[rule].how for rule in sorted(waste)},
        "designed": {
            "util_mean_pct": round(stats.util_mean, 4),
            "util_p5_pct": round(stats.util_p5, 4),
            "util_p95_pct": round(stats.util_p95, 4),
            "sm_active_mean": None if stats.sm_mean is None else round(stats.sm_mean, 4),
            "tensor_active_mean": (
                None if stats.tensor_mean is None else round(stats.tensor_mean, 4)
            ),
            "dram_active_mean": None if stats.dram_mean is None else round(stats.dram_mean, 4),
            "data_wait_share": stats.data_wait_share,
            "throttled_share": round(stats.throttled_share, 6),
            "profiling": job.scenario.profiling,
        },
    }


def truth_records(fleet: Fleet, jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """`truth_record` of each job, with the fleet truths' verdicts over these jobs added."""
    from simulator.rule_scenarios import SimulatedJob, fleet_rules

    records = [truth_record(fleet, job) for job in jobs]
    rules = fleet_rules()
    if not rules:
        return records
    simulated = []
    for job in jobs:
        host = fleet.hosts[job.placements[0].host]
        stats = job_stats(fleet.shape(job))
        steps = job.scenario.steps
        simulated.append(
            SimulatedJob(
                job.job_id,
                job.team,
                host.model.model_name,
                host.mig,
                job.scenario.name,
                steps.mfu if steps is not None else None,
                stats.gpu_hours * stats.training_share,
            )
        )
    by_id = {record["job_id"]: record for record in records}
    for rule in rules:
        for job_id, hours in rule.verdicts(simulated).items():
            record = by_id[job_id]
            record["rules"] = sorted({*record["rules"], rule.rule_id})
            waste = {**record["wasted_gpu_hours"], rule.rule_id: round(hours, 6)}
            record["wasted_gpu_hours"] = dict(sorted(waste.items()))
            record["how"] = dict(sorted({**record["how"], rule.rule_id: rule.how}.items()))
    return records
