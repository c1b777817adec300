"""A sharing plan as rows (dashboard, report), JSON and text (CLI). No I/O."""

from __future__ import annotations

from typing import Any

from analyzers.sharing.plan import Plan

__all__ = ["plan_rows", "plan_to_dict", "render_text"]


def plan_rows(plan: Plan) -> list[dict[str, Any]]:
    """One row per job GPU in a proposed group."""
    rows = []
    for n, g in enumerate(plan.groups, 1):
        for m in g.members:
            rows.append(
                {
                    "group": n,
                    "gpu": g.product,
                    "mechanism": g.mechanism,
                    "job_id": m.use.job_id,
                    "host": m.use.host,
                    "gpu_index": m.use.gpu,
                    "mig_profile": m.mig_profile or "",
                    "sm_mean_pct": 100 * m.use.sm_mean,
                    "memory_peak_gib": m.use.fb_used_max_mib / 1024,
                    "expected_slowdown_pct": 100 * (m.expected_slowdown - 1),
                    "risk_slowdown_pct": 100 * (m.risk_slowdown - 1),
                }
            )
    return rows


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    return {
        "window_h": plan.window_h,
        "candidates": plan.candidates,
        "not_candidates": plan.reasons,
        "gpus_freed": plan.gpus_freed,
        "freed_gpu_hours_per_week": plan.freed_gpu_hours_per_week,
        "groups": [
            {
                "gpu": g.product,
                "mechanism": g.mechanism,
                "gpus_freed": g.gpus_freed,
                "freed_gpu_hours_per_week": g.freed_gpu_hours_per_week,
                "constraints": list(g.constraints),
                "jobs": [
                    {
                        "job_id": m.use.job_id,
                        "host": m.use.host,
                        "gpu": m.use.gpu,
                        "mig_profile": m.mig_profile,
                        "expected_slowdown": m.expected_slowdown,
                        "risk_slowdown": m.risk_slowdown,
                        "sm_mean": m.use.sm_mean,
                        "sm_p95": m.use.sm_p95,
                        "memory_peak_mib": m.use.fb_used_max_mib,
                        "data_wait_share": m.use.data_wait_share,
                    }
                    for m in g.members
                ],
            }
            for g in plan.groups
        ],
    }


def render_text(plan: Plan) -> str:
    lines = [
        f"GPU sharing plan over {plan.window_h:.0f} h: {plan.candidates} under-used GPU(s), "
        f"{len(plan.groups)} co-location(s), {plan.gpus_freed} GPU(s) freed, "
        f"{plan.freed_gpu_hours_per_week:.0f} GPU-hours per week",
    ]
    if plan.reasons:
        why = ", ".join(f"{k}: {v}" for k, v in sorted(plan.reasons.items()))
        lines.append(f"not candidates: {why}")
    for n, g in enumerate(plan.groups, 1):
        lines.append(
            f"\n#{n} {g.mechanism} on one {g.product}: frees {g.gpus_freed} GPU(s), "
            f"{g.freed_gpu_hours_per_week:.0f} GPU-h/week"
        )
        for m in g.members:
            slot = f" as {m.mig_profile}" if m.mig_profile else ""
            lines.append(
                f"  {m.use.job_id} ({m.use.host} GPU {m.use.gpu}){slot}: SM {m.use.sm_mean:.0%} "
                f"mean / {m.use.sm_p95:.0%} p95, memory {m.use.fb_used_max_mib / 1024:.1f} GiB; "
                f"slowdown {m.expected_slowdown - 1:+.0%} expected, "
                f"{m.risk_slowdown - 1:+.0%} at p95"
            )
        lines.extend(f"  constraint: {c}" for c in g.constraints)
    return "\n".join(lines)
